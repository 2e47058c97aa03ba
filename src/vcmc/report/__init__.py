"""Outputs of a run: result files, tables and plots."""

from vcmc.report.outputs import result_summary, to_datatree, write_outputs

__all__ = ["result_summary", "to_datatree", "write_outputs"]
