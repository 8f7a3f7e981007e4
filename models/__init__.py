"""One readable file per architecture, built only on gradflow's public API."""
