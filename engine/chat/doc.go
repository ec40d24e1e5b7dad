// Package chat turns OpenAI-style chat messages into a model prompt and a
// model's reply back into structured parts.
//
// It owns three things: rendering a model's own Jinja chat template (from
// tokenizer_config.json or chat_template.jinja) the way Hugging Face
// transformers' apply_chat_template does; splitting GLM <think>…</think>
// reasoning from visible content as text streams in; and parsing GLM
// <tool_call> markup into OpenAI tool calls.
//
// It does not tokenize, generate or serve HTTP; it holds no model weights
// and does no I/O beyond reading the template files in LoadTemplate.
//
// Templates are untrusted input (they come with downloaded models): every
// render is bounded in steps, output, list sizes, call depth and time, and
// is cancelled with its context; see Limits.
package chat
