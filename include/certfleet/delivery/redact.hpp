#pragma once
// Redaction of command output before it is stored or logged (issue 28). What a post-deploy
// command prints (the file module's post_command, the SSH module's install/restore scripts)
// lands in target results and job log lines, which every role of the project reads and the
// store keeps in plaintext. A command that prints the key it was just given (`cat key.pem`, a
// verbose reload) must not put that key there. Pure: no I/O, no global state.
//
// What is replaced:
//  - every PEM private-key block: a "-----BEGIN <label>-----" line whose label ends in
//    "PRIVATE KEY" (PRIVATE KEY, ENCRYPTED PRIVATE KEY, RSA/EC/DSA/OPENSSH PRIVATE KEY …) up to
//    the matching "-----END … PRIVATE KEY-----", or to the end of the text when the block was
//    cut off; and, because the output kept is its tail, everything from the start of the text to
//    an "-----END … PRIVATE KEY-----" that has no BEGIN before it;
//  - anything that matches the delivered key's own bytes: a run of base64 characters (at least
//    redact_min_run long) that occurs inside the key's PEM body with its line breaks removed (so
//    a body line, a part of one cut by truncation, or the body re-wrapped at another width),
//    and any redact_min_run consecutive bytes of the key's DER (a command printing the key in
//    binary form).
// Each replaced span becomes "[private key redacted]" (a PEM block) or "[redacted]".
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace certfleet::delivery {

inline constexpr std::size_t redact_min_run = 12;

// `text` with the spans above replaced. `keys` are the private keys the command may have seen
// (PEM, any of the forms above: the one being delivered, and on a restore the one put back);
// empty ones are skipped, and with none only PEM blocks are redacted. Idempotent for real keys:
// redacting the result again changes nothing.
std::string redact_command_output(std::string_view text, std::span<const std::string_view> keys);
inline std::string redact_command_output(std::string_view text, std::string_view key_pem = {}) {
  return redact_command_output(text, std::span<const std::string_view>(&key_pem, 1));
}

}  // namespace certfleet::delivery
