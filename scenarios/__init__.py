"""The shipped scenario files (TOML) and the sample trace they replay, installed as package data.

`simulator.scenario.load_scenario("NAME")` finds ``NAME.toml`` here, from a checkout or from a
plain ``pip install``.
"""
