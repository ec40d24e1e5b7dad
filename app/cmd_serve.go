package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/frontend"
)

// maxDefaultContext caps the context serve plans when none is asked for:
// what coding agents need (their system prompts and tools alone are 10-30k
// tokens) without planning memory a chat never uses.
const maxDefaultContext = 32768

type serveFlags struct {
	model        string
	modelID      string
	bind         string
	port         int
	apiKey       string
	context      int
	maxBatch     int
	maxQueue     int
	maxTokens    int
	origins      []string
	allowedHosts []string
	noMTP        bool
	noDSA        bool
	ollamaPort   int
	grace        time.Duration
	mem          memoryFlags
	promptCache  promptCacheFlags
	gpu          gpuFlag
	remote       remoteFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the model over an OpenAI- and Anthropic-compatible HTTP API, with the web UI",
		Long: `Serve the model on a local HTTP API: /v1/chat/completions, /v1/completions,
/v1/responses, /v1/messages (Anthropic), /v1/models, Ollama's /api/chat,
/api/generate, /api/tags, /api/show, /api/ps and /api/version, /health,
/stats and the /v1/events websocket, and the web UI at /. It binds 127.0.0.1 by default;
binding any other address requires an API key: $SPOOL_API_KEY, or --api-key
(a flag's value is visible to every user of this machine in the process list,
/proc/PID/cmdline or ps; the variable is not).

Memory is planned before loading (--memory, --expert-cache): routed experts
stream from disk through the expert cache the plan leaves.

Prompt prefixes are cached (--prompt-cache, --prompt-cache-max): a request
that begins like an earlier one, even one served before a restart, restores
that prefix's state instead of reading it again, and its usage reports the
cached tokens.

With --remote URL no model is loaded: the API forwards to that
OpenAI-compatible server (vLLM, SGLang, another Spool; see docs/remote.md),
/v1/messages translated to its chat API, with the same local defaults
(loopback bind, --api-key, Host guard). --remote-key is sent to the server
only.`,
		Example: `  spool serve --model assets/models/glm52-demo
  SPOOL_API_KEY="$(openssl rand -hex 16)" spool serve --host 0.0.0.0 --port 8484
  SPOOL_REMOTE_KEY="$VLLM_API_KEY" spool serve --remote http://gpu-box:8000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory (default $SPOOL_MODEL or the demo model)")
	fl.StringVar(&f.modelID, "model-id", "", `model id clients send (default: the directory's name; "spool" is always accepted)`)
	fl.StringVar(&f.bind, "host", "127.0.0.1", "address to listen on")
	fl.IntVar(&f.port, "port", 8484, "port to listen on (0 picks a free one)")
	fl.StringVar(&f.apiKey, "api-key", "", "require this key as 'Authorization: Bearer KEY' or 'x-api-key' (default $SPOOL_API_KEY; prefer it: every local user can read a flag in the process list)")
	fl.IntVar(&f.context, "context", 0, "context length per sequence in tokens, at most the model's (default: the largest the memory plan allows, up to 32768)")
	fl.IntVar(&f.maxBatch, "max-batch", scheduler.DefaultMaxBatch, "requests generating at once (continuous batching)")
	fl.IntVar(&f.maxQueue, "max-queue", scheduler.DefaultMaxQueue, "requests waiting for a slot before answering 429")
	fl.IntVar(&f.maxTokens, "max-tokens", 0, "cap on tokens generated per request (default: the rest of the context)")
	fl.StringSliceVar(&f.origins, "cors-origin", nil, `extra CORS origin allowed ("scheme://host:*" for any port, "*" for all)`)
	fl.StringSliceVar(&f.allowedHosts, "allowed-host", nil, "extra Host header name accepted (DNS-rebinding guard)")
	fl.BoolVar(&f.noMTP, "no-mtp", false, "do not load the MTP draft layer (no speculative decoding)")
	fl.BoolVar(&f.noDSA, "no-dsa", false, "dense attention even where the DSA indexer would select")
	fl.DurationVar(&f.grace, "shutdown-grace", server.DefaultShutdownGrace, "on a stop (Ctrl-C, SIGTERM, SIGHUP), how long the requests in flight may run before they are ended with an error (503, a stream's error event)")
	fl.IntVar(&f.ollamaPort, "ollama-port", 0, fmt.Sprintf("also answer on this port of --host when it is free, for clients that assume Ollama's address (%d); 0: off", server.OllamaDefaultPort))
	f.mem.register(fl)
	f.promptCache.register(fl)
	f.gpu.register(fl)
	f.remote.register(fl)
	return cmd
}

func runServe(cmd *cobra.Command, f *serveFlags) error {
	warnSecretFlags(cmd, cmd.ErrOrStderr())
	rcfg, err := f.remote.config()
	if err != nil {
		return err
	}
	// A remote engine needs no model here (one found still feeds the
	// UI's fit page).
	dir, err := host.ResolveModelDir(f.model)
	if err != nil && rcfg.URL == "" {
		return err
	}
	if f.apiKey == "" {
		f.apiKey = os.Getenv("SPOOL_API_KEY")
	}
	// Check the security settings before the (slow) model load.
	if err := server.CheckBind(f.bind, f.apiKey); err != nil {
		return err
	}
	pc, err := f.promptCache.resolve()
	if err != nil {
		return err
	}
	log := newLogger(cmd.ErrOrStderr(), slog.LevelInfo)
	pc.Logger = log
	cfg := supervisorConfig{
		Server: server.Config{
			Host: f.bind, Port: f.port, APIKey: f.apiKey, ModelID: f.modelID,
			AllowedOrigins: f.origins, AllowedHosts: f.allowedHosts, MaxTokens: f.maxTokens, Logger: log, ShutdownGrace: f.grace,
		},
		Config: host.Config{
			ModelDir:    dir,
			Memory:      f.mem.Memory,
			Context:     f.context,
			MaxBatch:    f.maxBatch,
			MaxQueue:    f.maxQueue,
			NoMTP:       f.noMTP,
			NoDSA:       f.noDSA,
			UsageDir:    usageDir(),
			PromptCache: pc,
			GPU:         f.gpu.mode,
		},
		Remote:     rcfg,
		OllamaPort: f.ollamaPort,
	}
	if rcfg.URL == "" {
		// The served context: the one asked for, checked against the
		// model's positions and the memory plan, or else the largest
		// the plan fits up to maxDefaultContext.
		if cfg.Context, err = host.FitContext(cfg.Config, maxDefaultContext); err != nil {
			return err
		}
	}
	assets, _ := frontend.Assets()
	var eh *supervisor
	downloads := newDownloadManager(func(ev server.Event) {
		if eh != nil {
			eh.publish(ev)
		}
	})
	defer downloads.Close()
	eh = newSupervisor(cfg, assets, newUIAPI(dir, newSettingsStore(settingsPath()), downloads), nil)
	return runHeadless(cmd.Context(), eh, cmd.ErrOrStderr())
}
