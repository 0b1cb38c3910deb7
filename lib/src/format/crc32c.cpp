#include "wbkit/crc32c.hpp"

#include <algorithm>
#include <climits>
#include <crypto++/crc.h>
#include <isa-l/crc.h>

namespace wbkit {

namespace {

// ISA-L's CRC functions take and return the raw register: CRC-32C starts it
// at all ones and inverts it at the end, which they leave to the caller.
constexpr std::uint32_t register_init = 0xFFFFFFFFu;

std::uint32_t isal_update(Crc32cEngine engine, std::uint32_t reg, std::span<const std::byte> data)
{
	// Lengths are int in ISA-L's interface.
	constexpr std::size_t max_chunk = std::size_t(INT_MAX) & ~std::size_t(4095);
	auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(data.data()));
	for (std::size_t left = data.size(); left > 0;) {
		const std::size_t n = std::min(left, max_chunk);
		reg = engine == Crc32cEngine::fast ? crc32_iscsi(p, int(n), reg) : crc32_iscsi_base(p, int(n), reg);
		p += n;
		left -= n;
	}
	return reg;
}

} // namespace

struct Crc32c::Impl {
	explicit Impl(Crc32cEngine e) : engine(e) {}
	Crc32cEngine engine;
	std::uint32_t reg = register_init;
	CryptoPP::CRC32C reference;
};

Crc32c::Crc32c(Crc32cEngine engine) : impl_(std::make_unique<Impl>(engine)) {}
Crc32c::~Crc32c() = default;

void Crc32c::update(std::span<const std::byte> data)
{
	if (impl_->engine == Crc32cEngine::reference)
		impl_->reference.Update(reinterpret_cast<const CryptoPP::byte*>(data.data()), data.size());
	else
		impl_->reg = isal_update(impl_->engine, impl_->reg, data);
}

std::uint32_t Crc32c::finish()
{
	if (impl_->engine != Crc32cEngine::reference) {
		const std::uint32_t crc = ~impl_->reg;
		impl_->reg = register_init;
		return crc;
	}
	// Crypto++ emits the final CRC little-endian.
	CryptoPP::byte digest[CryptoPP::CRC32C::DIGESTSIZE];
	impl_->reference.Final(digest);
	return std::uint32_t(digest[0]) | std::uint32_t(digest[1]) << 8 | std::uint32_t(digest[2]) << 16 |
	       std::uint32_t(digest[3]) << 24;
}

std::uint32_t crc32c(std::span<const std::byte> data, Crc32cEngine engine)
{
	if (engine != Crc32cEngine::reference)
		return ~isal_update(engine, register_init, data);
	Crc32c crc(engine);
	crc.update(data);
	return crc.finish();
}

} // namespace wbkit
