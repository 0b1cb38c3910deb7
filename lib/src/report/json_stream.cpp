#include "report/json_stream.hpp"

#include <cctype>

namespace wbkit {

void write_json_document(std::ostream& out, const nlohmann::json& head, std::span<const StreamedArray> arrays)
{
	std::string text = head.dump(2);
	text.resize(text.rfind('}'));
	while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
		text.pop_back();
	out << text;
	bool first_member = head.empty();
	for (const StreamedArray& array : arrays) {
		out << (first_member ? "" : ",") << "\n  " << nlohmann::json(array.key).dump() << ": [";
		first_member = false;
		bool first = true;
		array.produce([&](const nlohmann::json& element) {
			out << (first ? "\n    " : ",\n    ") << element.dump();
			first = false;
		});
		out << (first ? "]" : "\n  ]");
	}
	out << "\n}\n";
}

} // namespace wbkit
