"""Prompt-cache billing: price profiles, replay bills, break-even and provider economics."""
