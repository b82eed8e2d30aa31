"""The kit provider integrations build on."""
