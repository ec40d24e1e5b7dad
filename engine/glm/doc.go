// Package glm owns the GLM output dialect: the markup a GLM model's chat
// template writes into a reply, and its reading back.
//
// It has three parts. The markup: reasoning in <think>…</think>
// (reasoning.go: ReasoningSplitter, PromptOpensThink, CloseThink) and
// tool calls as
// <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>
// (toolcall.go: ParseToolCalls with its salvage rules, ForcedCall,
// NewCallID). The streaming Parser (stream.go), whose Add(text, end) turns
// a reply's text, cut anywhere, into pieces of reasoning, visible text and
// tool calls. And the tool-call constraint (constraint.go), which makes a
// forced tool choice decode as well-formed markup of a declared tool with
// its required arguments.
//
// It does not tokenize, render templates (engine/chat) or generate; the
// local engine (engine/local) feeds it detokenized text, after matching
// stop strings, and mints the calls' ids.
package glm
