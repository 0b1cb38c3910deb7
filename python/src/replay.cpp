// replay.hpp: bound once the replay planner lands in the library.
#include "bindings.hpp"

namespace wbkit::python {

void bind_replay(py::module_&) {}

} // namespace wbkit::python
