// Package anthropic is Anthropic's Messages API (/v1/messages and
// count_tokens) as a translation: the request (system prompt, turns,
// tool_use and tool_result blocks, tools and tool_choice, thinking, stop
// sequences, sampling, output_config.format) into a turn (engine/turn),
// and the turn's pieces back into the message: whole (Reply) or as the
// event stream (Stream: message_start, thinking, text and tool_use blocks,
// pings, the stop reason and usage), framed one block at a time
// (framing.go). Refusals are worded as Anthropic's (Error: "prompt is too
// long", which Claude Code acts on). The same translation serves the
// local engine and the remote front: a remote's tool calls may come in
// parts, which stream into their block as they come.
package anthropic
