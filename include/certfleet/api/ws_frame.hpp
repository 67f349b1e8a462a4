#pragma once
// A WebSocket data frame as a server sends it (RFC 6455 §5.2): FIN, opcode text, unmasked,
// the shortest length encoding. Written without I/O so the one frame built per log batch can be
// handed, byte for byte, to every subscriber.
#include <string>
#include <string_view>

namespace certfleet::api {

std::string ws_text_frame(std::string_view payload);

}  // namespace certfleet::api
