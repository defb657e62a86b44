"""Test and benchmark support that the neardup wheel does not ship: the synthetic corpus
generator and the reference implementations results are checked against."""
