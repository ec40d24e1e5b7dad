// Package config owns a GLM-5.2 model's configuration: it parses config.json
// and generation_config.json, derives the per-layer schedules (dense/sparse
// MLP, full/shared DSA indexer), validates every field the engine relies on,
// and answers questions about the model's geometry.
//
// It reads no weights; capabilities that depend on which tensors exist (MTP,
// DSA) are decided from the container's tensors by engine/model.
package config
