"""Workloads: requests and sessions, generators, arrival processes, trace readers."""
