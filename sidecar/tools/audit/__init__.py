"""``querylog audit``: how well a protected log resists paper 001's attacks, and what it kept.

* :mod:`~sidecar.tools.audit.logs` reads both logs (same schema as the sidecar: TSV or JSON lines).
* :mod:`~sidecar.tools.audit.matcher` is paper 001's log matcher (§3.3.3).
* :mod:`~sidecar.tools.audit.deanon` runs de-anonymizers 1-4 (§4.2.2, Algorithm 3), with and without time order.
* :mod:`~sidecar.tools.audit.utility` compares per-user category profiles (Jensen-Shannon divergence, base 2).
* :mod:`~sidecar.tools.audit.report` puts it together: one JSON object, and a self-contained HTML report.
"""
