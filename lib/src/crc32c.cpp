#include "wbkit/crc32c.hpp"

#include <crypto++/crc.h>

namespace wbkit {

struct Crc32c::Impl {
	CryptoPP::CRC32C hash;
};

Crc32c::Crc32c() : impl_(std::make_unique<Impl>()) {}
Crc32c::~Crc32c() = default;

void Crc32c::update(std::span<const std::byte> data)
{
	impl_->hash.Update(reinterpret_cast<const CryptoPP::byte*>(data.data()), data.size());
}

std::uint32_t Crc32c::finish()
{
	// Crypto++ emits the final CRC little-endian.
	CryptoPP::byte digest[CryptoPP::CRC32C::DIGESTSIZE];
	impl_->hash.Final(digest);
	return std::uint32_t(digest[0]) | std::uint32_t(digest[1]) << 8 | std::uint32_t(digest[2]) << 16 |
	       std::uint32_t(digest[3]) << 24;
}

std::uint32_t crc32c(std::span<const std::byte> data)
{
	Crc32c crc;
	crc.update(data);
	return crc.finish();
}

} // namespace wbkit
