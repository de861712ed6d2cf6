"""show or set the run limits (time, loop iterations, ...)

%limits                                  show the limits as JSON
%limits {"time": 5, "loop_iterations": 1000}
Keys: time (seconds), loop_iterations, db_rows, llm_cost (dollars),
definition_length (characters), memory (bytes), output_parts,
output_part_bytes, output_bytes.
"""

from __future__ import annotations

from s2o_kernel.kernel.magics.base import Magic
from s2o_kernel.kernel.magics.sections import section_handler

#: ``%limits`` shows the ``limits`` section of the settings or merges a JSON object into it (SPEC 6, 10).
handle = section_handler("limits", '{"time": 5}')

MAGIC = Magic("limits", __doc__, line=handle, cell=handle)
