"""``loopwarden analyze``: replay recorded transcripts through a real LoopGuard and report.

``replay`` drives the guard per trajectory, ``runner`` spreads files over processes, ``sweep``
crosses config variants, and ``report_text`` / ``report_json`` / ``report_html`` render results.
"""
