#include "wbkit/errors.hpp"

#include <cerrno>
#include <cstring>

namespace wbkit {

IoError::IoError(const std::string& what, std::string path, int err)
	: Error(path + ": " + what + (err ? std::string(": ") + std::strerror(err) : std::string())),
	  path_(std::move(path)), errno_(err)
{
}

bool is_out_of_space(int err) noexcept { return err == ENOSPC || err == EFBIG || err == EDQUOT; }

} // namespace wbkit
