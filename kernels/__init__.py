"""Pure JAX numerics: max-min rate allocation and the event-driven engine.

Nothing here jits, vmaps or validates: callers do (netsim.simulate, sweeps, calibration).
"""

from ._types import MAX_EVENTS as MAX_EVENTS
from ._types import NONFINITE as NONFINITE
from ._types import OK as OK
from ._types import STALLED as STALLED
from ._types import Allocation as Allocation
from ._types import Network as Network
from ._types import Packets as Packets
from ._types import Program as Program
from ._types import SimState as SimState
from ._types import Status as Status
from .engine import TIE as TIE
from .engine import first_byte_wait as first_byte_wait
from .engine import initial_state as initial_state
from .engine import payload_capacity as payload_capacity
from .engine import route_latency as route_latency
from .engine import run as run
from .engine import step as step
from .maxmin import maxmin_rates as maxmin_rates
