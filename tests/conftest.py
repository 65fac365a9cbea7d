"""Hypothesis profiles for the suite: ``ci`` (set CI=1: 30 examples, derandomised, so a run is
reproducible and bounded) and ``dev`` (the default: 60 random examples), or any profile named by
SPECSIM_HYPOTHESIS_PROFILE.  The doctest namespace is set in the root conftest.py.
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("SPECSIM_HYPOTHESIS_PROFILE", "dev"))
