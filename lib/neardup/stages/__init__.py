"""Spark stages: each a function from DataFrames to a DataFrame, its schemas in its docstring."""
