package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/pull"
)

// exitNoSpace is spool pull --dry-run's exit status when the preflight
// refuses the download for lack of free space.
const exitNoSpace = 2

// exitInterrupted is spool pull's exit status when it was stopped by a
// signal; everything on disk is kept for the next run.
const exitInterrupted = 130

type pullFlags struct {
	revision     string
	cacheDir     string
	store        string
	keepOriginal bool
	connections  int
	dryRun       bool
	repair       bool
	jsonOut      bool
	// Tuning for tests and drills (hidden).
	chunkSize, checkpointBytes int64
}

func newPullCmd() *cobra.Command {
	var f pullFlags
	cmd := &cobra.Command{
		Use:   "pull [REPO]",
		Short: "Download a model into Spool's store, packed as it downloads, resuming what is already there",
		Long: `Download a model repository at a revision into Spool's store
(` + pull.StoreEnv + `, else ~/Library/Application Support/Spool/Models on macOS,
~/.local/share/spool/models elsewhere), packed as it downloads: each shard is
verified (its SHA-256), its routed experts packed losslessly and every record
decoded back from the disk, then its raw expert bytes released, before the
next shard is allowed onto the disk. The model takes about three quarters of
its download on disk, plus two shards while it downloads, and Spool reads a
quarter fewer bytes per token. Without REPO it downloads ` + download.DefaultRepo + `
at revision ` + download.DefaultRevision + `. spool unpack restores the original
files byte for byte.

--keep-original downloads into the Hugging Face cache as before (HF_HUB_CACHE,
else $HF_HOME/hub, else ~/.cache/huggingface/hub), where other tools find the
files, and keeps only the packs (and links to the files) in the store: the
disk holds both.

Before the first byte it checks free space (what the files will take, plus a
reserve). Interrupted downloads resume where they stopped, packing included:
run the same command again. Every file is verified (LFS sha256 or git blob id)
before it is published.

Environment: HF_ENDPOINT (hub URL), HF_TOKEN or the token file (gated and
private repositories), HF_HOME, HF_HUB_CACHE.

--dry-run prints the plan and the free-space check and exits 0, or 2 when
there is not enough space. --repair reads every packed expert of the stored
model and restores each damaged one from the hub (its raw bytes fetched with
Range requests, packed again and written over the damaged record); a running
Spool does the same by itself when a read finds one damaged.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, rev := download.DefaultRepo, download.DefaultRevision
			if len(args) == 1 {
				repo, rev = args[0], "main"
			}
			if f.revision == "" {
				f.revision = rev
			}
			return runPull(cmd, repo, f)
		},
	}
	cmd.Flags().StringVar(&f.revision, "revision", "", "branch, tag or commit to download (default: main, or the pinned commit of the default model)")
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", "", "Hugging Face cache directory, with --keep-original (default: HF_HUB_CACHE or $HF_HOME/hub)")
	cmd.Flags().StringVar(&f.store, "store", "", "Spool's store (default: "+pull.StoreEnv+" or the platform's application data folder)")
	cmd.Flags().BoolVar(&f.keepOriginal, "keep-original", false, "keep the original files in the Hugging Face cache for other tools (the disk holds them and the packs)")
	cmd.Flags().Int64Var(&f.chunkSize, "chunk-size", 0, "bytes per range request")
	cmd.Flags().Int64Var(&f.checkpointBytes, "checkpoint-bytes", 0, "bytes written between two checkpoints of a range")
	cmd.Flags().MarkHidden("chunk-size")
	cmd.Flags().MarkHidden("checkpoint-bytes")
	cmd.Flags().IntVar(&f.connections, "connections", download.DefaultConnections, "parallel range requests")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the plan and the free-space check, download nothing")
	cmd.Flags().BoolVar(&f.repair, "repair", false, "check every packed expert of the stored model and restore the damaged ones from the hub")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print the plan as JSON and progress as JSON lines")
	return cmd
}

func runPull(cmd *cobra.Command, repo string, f pullFlags) error {
	env, err := hub.EnvFromOS()
	if err != nil {
		return err
	}
	if env.Offline {
		return errors.New("HF_HUB_OFFLINE is set: spool pull needs the hub to list the files; unset it to download")
	}
	cacheDir := env.CacheDir
	if f.cacheDir != "" {
		cacheDir = f.cacheDir
	}
	out := cmd.OutOrStdout()
	var r *pullRenderer
	if !f.dryRun {
		r = newPullRenderer(out, f.jsonOut)
	}
	opts := pull.Options{
		Repo: repo, Revision: f.revision, Client: hub.NewClient(env),
		Store: f.store, KeepOriginal: f.keepOriginal, CacheDir: cacheDir,
		Download: download.Options{Connections: f.connections, ChunkSize: f.chunkSize, CheckpointBytes: f.checkpointBytes},
	}
	if r != nil {
		opts.OnEvent = r.handle
	}
	p, err := pull.New(opts)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	plan, err := p.Plan(ctx)
	if err != nil {
		return err
	}
	if f.repair {
		return repairPull(cmd, plan.ModelDir, hub.NewClient(env))
	}
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(plan); err != nil {
			return err
		}
	} else {
		printPlan(out, plan, env, f.dryRun)
	}
	if f.dryRun {
		if !plan.Preflight.OK {
			return exitError{code: exitNoSpace}
		}
		return nil
	}
	if !plan.Preflight.OK {
		return &download.PreflightError{Preflight: plan.Preflight}
	}
	err = p.Run(ctx)
	r.finish()
	pr := p.Progress()
	switch {
	case err == nil:
		if !f.jsonOut {
			pk := p.Packing()
			fmt.Fprintf(out, "Done: %d files, %s downloaded, in %s\n", pr.FilesTotal, download.FormatBytes(pr.Total), plan.ModelDir)
			if pk.RawBytes > 0 {
				how := "raw experts released"
				if f.keepOriginal {
					how = "the original files kept for other tools"
				}
				fmt.Fprintf(out, "Packed: %d shards, experts %s -> %s (%.3f), %s; the model takes %s on disk\n", pk.Done,
					download.FormatBytes(pk.RawBytes), download.FormatBytes(pk.PackedBytes), float64(pk.PackedBytes)/float64(pk.RawBytes),
					how, download.FormatBytes(pk.DiskBytes))
			}
		}
		return nil
	case errors.Is(err, download.ErrCancelled) && ctx.Err() != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "Stopped with %s of %s on disk; run the same command again to resume.\n",
			download.FormatBytes(pr.Done), download.FormatBytes(pr.Total))
		return exitError{code: exitInterrupted}
	}
	return err
}

// repairPull restores the damaged records of the stored model in dir.
func repairPull(cmd *cobra.Command, dir string, client *hub.Client) error {
	out := cmd.OutOrStdout()
	res, err := pull.RepairModel(cmd.Context(), dir, client, func(r pull.RepairResult) {
		if r.Err != nil {
			fmt.Fprintf(out, "layer %d expert %d (%s): damaged, not repaired: %v\n", r.Layer, r.Expert, r.File, r.Err)
			return
		}
		fmt.Fprintf(out, "layer %d expert %d (%s): damaged, repaired from the hub\n", r.Layer, r.Expert, r.File)
	})
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range res {
		if r.Err != nil {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d damaged experts could not be repaired", failed, len(res))
	}
	fmt.Fprintf(out, "%s: every packed expert checks out (%d repaired)\n", dir, len(res))
	return nil
}

// printPlan writes the plan for people; with files it lists every file.
func printPlan(w io.Writer, pp *pull.Plan, env hub.Env, files bool) {
	p := pp.Plan
	var complete, partial, lfs int
	for _, f := range p.Files {
		switch f.Status {
		case download.FileComplete:
			complete++
		case download.FilePartial:
			partial++
		}
		if f.LFS {
			lfs++
		}
	}
	rev := p.Revision
	if rev != p.Commit {
		rev += " (commit " + p.Commit + ")"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Repository\t%s\n", p.Repo)
	fmt.Fprintf(tw, "Revision\t%s\n", rev)
	fmt.Fprintf(tw, "Hub\t%s\n", env.Endpoint)
	if pp.KeepOriginal {
		fmt.Fprintf(tw, "Cache\t%s\n", p.CacheDir)
		fmt.Fprintf(tw, "Snapshot\t%s (the original files, for other tools)\n", p.SnapshotDir)
	}
	fmt.Fprintf(tw, "Store\t%s\n", pp.ModelDir)
	if e := pp.Estimate; e.From != "" {
		how := "packed as it downloads"
		if pp.KeepOriginal {
			how = "the packs beside the originals"
		}
		fmt.Fprintf(tw, "Stored\tabout %s on disk, %s (experts at %.2f of %s; %s)\n", download.FormatBytes(e.Stored), how,
			e.Ratio, download.FormatBytes(e.ExpertBytes), map[bool]string{true: "measured", false: "assumed"}[e.Measured])
	} else {
		fmt.Fprintf(tw, "Stored\tas downloaded (the shards' headers could not be read: nothing to pack)\n")
	}
	fmt.Fprintf(tw, "Files\t%d (%d LFS), %s bytes (%s)\n", len(p.Files), lfs, humanize.Comma(p.TotalBytes), download.FormatBytes(p.TotalBytes))
	fmt.Fprintf(tw, "On disk\t%s bytes (%d files complete, %d partial)\n", humanize.Comma(p.Present), complete, partial)
	fmt.Fprintf(tw, "To fetch\t%s bytes (%s)\n", humanize.Comma(p.ToFetch), download.FormatBytes(p.ToFetch))
	pf := p.Preflight
	verdict := "OK"
	switch {
	case !pf.Checked:
		verdict = "not checked"
	case !pf.OK:
		verdict = "NOT ENOUGH SPACE"
	case pf.Purge:
		verdict = "OK once macOS frees purgeable space"
	}
	fmt.Fprintf(tw, "Free space\t%s: needs %s bytes (%s to fetch, stored in %s, + %s reserve), %s bytes available",
		verdict, humanize.Comma(pf.Required), download.FormatBytes(pf.ToFetch), download.FormatBytes(pf.Stored), download.FormatBytes(pf.Reserve), humanize.Comma(pf.Available))
	if pf.Important > pf.Available {
		fmt.Fprintf(tw, ", %s counting purgeable space", humanize.Comma(pf.Important))
	}
	fmt.Fprintln(tw)
	tw.Flush()
	if !pf.OK || !pf.Checked {
		fmt.Fprintln(w, pf.Message)
	}
	if !files {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STATUS\tSIZE\tON DISK\t PATH")
	for _, f := range p.Files {
		fmt.Fprintf(tw, "%s\t%s\t%s\t %s\n", f.Status, humanize.Comma(f.Size), humanize.Comma(f.Present), f.Path)
	}
	tw.Flush()
}

// pullRenderer shows download events: a progress bar on a terminal, plain
// lines otherwise, JSON lines with --json.
type pullRenderer struct {
	mu       sync.Mutex
	w        io.Writer
	json     bool
	tty      bool                     // w is a terminal: draw a bar
	bar      *progressbar.ProgressBar // created at the first progress event
	lastLine time.Time
	lastPct  int
}

// plainInterval is the time between progress lines when not on a terminal.
const plainInterval = 10 * time.Second

func newPullRenderer(w io.Writer, jsonOut bool) *pullRenderer {
	r := &pullRenderer{w: w, json: jsonOut, lastPct: -1}
	if f, ok := w.(*os.File); ok && !jsonOut && term.IsTerminal(int(f.Fd())) {
		r.tty = true
	}
	return r
}

// handle receives one event; the puller calls it one event at a time.
func (r *pullRenderer) handle(pe pull.Event) {
	e := pe.Event
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		if e.Kind == download.EventProgress && time.Since(r.lastLine) < time.Second {
			return
		}
		r.lastLine = time.Now()
		b, err := json.Marshal(pe)
		if err == nil {
			fmt.Fprintf(r.w, "%s\n", b)
		}
		return
	}
	switch e.Kind {
	case download.EventProgress:
		r.progress(e.Progress)
	case download.EventRetry, download.EventIntegrity, download.EventWarning:
		r.line("warning: " + e.Message)
	case download.EventState:
		if e.State == download.StatePaused {
			r.line("paused")
		}
	case download.EventFileDone:
		if !r.tty {
			r.line(fmt.Sprintf("verified %s (%d/%d files)", e.File, e.Progress.FilesDone, e.Progress.FilesTotal))
		}
	case pull.EventPack:
		if pk := pe.Pack; pk != nil {
			how := "raw experts released"
			if pk.KeepOriginal {
				how = "pack beside the original"
			}
			r.line(fmt.Sprintf("packed %s (%d/%d shards; %s; the model takes %s so far)", e.File, pk.Done, pk.Shards, how, download.FormatBytes(pk.DiskBytes)))
		}
	}
}

func (r *pullRenderer) progress(p download.Progress) {
	status := fmt.Sprintf("%s / %s", download.FormatBytes(p.Done), download.FormatBytes(p.Total))
	if p.Rate > 0 {
		status += fmt.Sprintf("  %s/s", download.FormatBytes(int64(p.Rate)))
	}
	if eta := p.ETA(); eta > 0 {
		status += "  ETA " + eta.Round(time.Second).String()
	}
	if r.tty {
		if r.bar == nil {
			r.bar = progressbar.NewOptions64(max(p.Total, 1),
				progressbar.OptionSetWriter(r.w),
				progressbar.OptionFullWidth(),
				progressbar.OptionSetElapsedTime(false),
				progressbar.OptionSetPredictTime(false),
				progressbar.OptionShowDescriptionAtLineEnd(),
				progressbar.OptionThrottle(100*time.Millisecond),
			)
		}
		if r.bar.GetMax64() != p.Total && p.Total > 0 {
			r.bar.ChangeMax64(p.Total)
		}
		r.bar.Describe(status)
		r.bar.Set64(p.Done)
		return
	}
	pct := 100
	if p.Total > 0 {
		pct = int(p.Done * 100 / p.Total)
	}
	if time.Since(r.lastLine) < plainInterval && pct/5 == r.lastPct/5 {
		return
	}
	r.lastPct = pct
	r.line(fmt.Sprintf("%3d%%  %s", pct, status))
}

// line prints a message above the bar (or as a plain line).
func (r *pullRenderer) line(s string) {
	r.lastLine = time.Now()
	if r.bar != nil {
		r.bar.Clear()
		fmt.Fprintln(r.w, strings.TrimSpace(s))
		r.bar.RenderBlank()
		return
	}
	fmt.Fprintln(r.w, strings.TrimSpace(s))
}

// finish ends the bar's line.
func (r *pullRenderer) finish() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		r.bar.Exit()
		fmt.Fprintln(r.w)
	}
}
