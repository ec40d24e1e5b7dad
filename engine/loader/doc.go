// Package modeldir opens a model directory for inference: it reads the
// config, opens and validates the container (headers only, before any
// weight is read), loads the resident weights into the model (outside the
// Go heap: the mapped shards when every expert stays in memory, one arena
// when the experts stream) and sets up the routed-expert source. It owns the open files and closes them.
//
// It does not tokenize or render prompts; see engine/tokenizer and
// engine/chat.
package loader
