"""Outputs of a run: result files (``write_outputs``) and the HTML report of a fit's folder
(``write_report``)."""

from vcmc.report.outputs import result_summary, to_datatree, write_outputs


def __getattr__(name):
    # the report pulls in matplotlib and scipy: imported only when asked for, not by every `vcmc fit`
    if name == "write_report":
        from vcmc.report.build import write_report

        return write_report
    raise AttributeError(f"module 'vcmc.report' has no attribute {name!r}")


__all__ = ["result_summary", "to_datatree", "write_outputs", "write_report"]
