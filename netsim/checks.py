"""Value checks and safe output for code built on netsim (netsim.calibrate, your own builders and readers):
the checks netsim's scenario reader applies, each raising `netsim.ScenarioError` naming the field and the
value, the atomic file writes its outputs use, and the byte labels its messages print (`format_bytes`). Defined in netsim._checks, the one place for them."""

from ._checks import MAX_BANDWIDTH as MAX_BANDWIDTH
from ._checks import MAX_BYTES as MAX_BYTES
from ._checks import MAX_TIME as MAX_TIME
from ._checks import MIN_BANDWIDTH as MIN_BANDWIDTH
from ._checks import choice as choice
from ._checks import count as count
from ._checks import fraction as fraction
from ._checks import identifier as identifier
from ._checks import identifiers as identifiers
from ._checks import number as number
from ._checks import quantity as quantity
from ._checks import samples as samples
from ._checks import text as text
from ._checks import to_json as to_json
from ._checks import write_atomic as write_atomic
from ._units import format_bytes as format_bytes
