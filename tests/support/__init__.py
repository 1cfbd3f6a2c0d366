"""Helpers the tests share: flows, a serve process, the oracle bridges, case tables."""
