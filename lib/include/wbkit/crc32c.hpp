// CRC-32C (Castagnoli), computed by Crypto++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace wbkit {

class Crc32c {
public:
	Crc32c();
	~Crc32c();
	Crc32c(const Crc32c&) = delete;
	Crc32c& operator=(const Crc32c&) = delete;

	void update(std::span<const std::byte> data);
	// The CRC-32/ISCSI value of everything updated so far; resets the state.
	std::uint32_t finish();

private:
	struct Impl;
	std::unique_ptr<Impl> impl_;
};

std::uint32_t crc32c(std::span<const std::byte> data);

} // namespace wbkit
