#include "wbkit/errors.hpp"

#include <cstring>

namespace wbkit {

IoError::IoError(const std::string& what, std::string path, int err)
	: Error(path + ": " + what + (err ? std::string(": ") + std::strerror(err) : std::string())),
	  path_(std::move(path)), errno_(err)
{
}

} // namespace wbkit
