"""The example models: one readable file per architecture, built only on gradflow's public API.

Read after gradflow/nn/: gpt.py first (decoder.py holds what it shares with llama.py), then llama.py
and trace.py; toy.py goes with tutorial 02, and transformer.py is the 2017 encoder-decoder.
"""
