"""show or set compile rules (operators, comprehension limits)

%rules                                   show the rules as JSON
%rules {"operators": {"<<": "off"}}      merge settings into the rules
%rules {"max_comprehension_depth": 2, "max_for_clauses": 2}
"""

from __future__ import annotations

from s2o_kernel.kernel.magics.base import Magic
from s2o_kernel.kernel.magics.sections import section_handler

#: ``%rules`` shows the ``rules`` section of the settings or merges a JSON object into it (SPEC 3, 10).
handle = section_handler("rules", '{"operators": {"<<": "off"}}')

MAGIC = Magic("rules", __doc__, line=handle, cell=handle)
