// Package chat turns OpenAI-style chat messages into a model prompt.
//
// It owns the chat message (Message, ToolCall, Tool: the canonical
// conversation every API translates to) and rendering a model's own Jinja
// chat template (from tokenizer_config.json or chat_template.jinja) the
// way Hugging Face transformers' apply_chat_template does. Reading a
// reply's reasoning and tool-call markup back is the model's dialect
// (engine/glm).
//
// It does not tokenize, generate or serve HTTP; it holds no model weights
// and does no I/O beyond reading the template files in LoadTemplate.
//
// Templates are untrusted input (they come with downloaded models): every
// render is bounded in steps, output, list sizes, call depth and time, and
// is cancelled with its context; see Limits.
package chat
