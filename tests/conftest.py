"""Hypothesis profiles for the suite: ``ci`` (set CI=1: 30 examples, derandomised, so a run is
reproducible and bounded), ``dev`` (the default: 60 random examples) and ``campaign`` (dev with
240 examples, for scripts/hypothesis_campaign.sh), or any profile named by
SPECSIM_HYPOTHESIS_PROFILE.  SPECSIM_HYPOTHESIS_NO_DATABASE=1 (set by the campaign) turns off the
example database, so a failure is reported under the seed that drew it, not replayed under later
seeds.  Tests that pin ``max_examples`` with ``@settings`` keep their own count under every profile.
The doctest namespace is set in the root conftest.py.
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("campaign", parent=settings.get_profile("dev"), max_examples=240)
_profile = "ci" if os.environ.get("CI") else os.environ.get("SPECSIM_HYPOTHESIS_PROFILE", "dev")
if os.environ.get("SPECSIM_HYPOTHESIS_NO_DATABASE"):
    settings.register_profile(_profile + "-nodb", parent=settings.get_profile(_profile), database=None)
    _profile += "-nodb"
settings.load_profile(_profile)
