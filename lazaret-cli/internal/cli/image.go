package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/image/build"
	"lazaret.dev/pkg/image/registry"
	"lazaret.dev/pkg/image/store"
)

// imageCommand is `lazaret-cli image`: the local image store.
func imageCommand() *cli.Command {
	// --config and --storage-root may be given before or after the
	// subcommand.
	roots := func(more ...cli.Flag) []cli.Flag {
		return append(more, configFileFlag(), storageRootFlag())
	}
	platform := &cli.StringFlag{
		Name:  "platform",
		Usage: "os/arch[/variant] to select from multi-platform images (default linux/<host arch>)",
	}
	return &cli.Command{
		Name:  "image",
		Usage: "manage the local image store (<storage root>/images)",
		Flags: roots(),
		Subcommands: []*cli.Command{
			{
				Name:      "load",
				Usage:     "store the images of an OCI image layout (directory or tar) or a docker-archive tar",
				ArgsUsage: "FILE",
				Flags: roots(
					&cli.StringFlag{Name: "tag", Usage: "reference to store the image under, replacing the archive's own name"},
					platform,
				),
				Action: imageLoad,
			},
			{
				Name:      "pull",
				Usage:     "fetch an image from its registry (credentials from the docker config file)",
				ArgsUsage: "REF",
				Flags: roots(
					platform,
					&cli.BoolFlag{Name: "insecure", Usage: "reach the registry over plain HTTP"},
				),
				Action: imagePull,
			},
			{
				Name:    "ls",
				Aliases: []string{"list"},
				Usage:   "list stored images",
				Flags:   roots(),
				Action:  imageList,
			},
			{
				Name:      "rm",
				Usage:     "remove stored references (blobs stay until prune)",
				ArgsUsage: "REF...",
				Flags:     roots(),
				Action:    imageRemove,
			},
			{
				Name:   "prune",
				Usage:  "delete blobs no stored reference needs",
				Flags:  roots(),
				Action: imagePrune,
			},
			{
				Name:      "build-dir",
				Usage:     "store a one-layer image made from a directory tree",
				ArgsUsage: "DIR",
				Flags: roots(
					&cli.StringFlag{Name: "tag", Required: true, Usage: "reference to store the image under, e.g. localhost/NAME:TAG"},
					&cli.StringFlag{Name: "output", TakesFile: true, Usage: "write the image to `FILE` as a docker-archive tar (for docker load, kind load image-archive, skopeo) instead of storing it"},
					&cli.StringFlag{Name: "entrypoint", Usage: `entrypoint as a JSON array, e.g. '["/bin/sh","-c"]'`},
					&cli.StringFlag{Name: "cmd", Usage: `command as a JSON array, e.g. '["/bin/sh"]'`},
					&cli.GenericFlag{Name: "env", Value: &repeated{}, Usage: "environment variable NAME=VALUE (repeatable)"},
					&cli.StringFlag{Name: "user", Usage: "user (and group) to run as, e.g. 0:0"},
					&cli.StringFlag{Name: "workdir", Usage: "working directory"},
					&cli.Int64Flag{Name: "source-date-epoch", EnvVars: []string{"SOURCE_DATE_EPOCH"}, Value: -1, Usage: "set every file time and the creation time to this Unix time, for a reproducible image"},
					platform,
				),
				Action: imageBuildDir,
			},
		},
	}
}

// repeated is a repeatable string flag that never splits its values.
type repeated struct{ values []string }

func (r *repeated) Set(v string) error { r.values = append(r.values, v); return nil }
func (r *repeated) String() string     { return strings.Join(r.values, " ") }

// openImageStore opens <storage root>/images, the storage root resolved
// as for every command (resolveRoots), creating the root when missing.
func openImageStore(c *cli.Context) (*store.Store, error) {
	r, err := resolveRoots(c, 1)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(r.StorageRoot, 0o700); err != nil {
		return nil, fmt.Errorf("creating storage root %q: %w", r.StorageRoot, err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return store.Open(filepath.Join(r.StorageRoot, "images"), log)
}

func parsePlatform(c *cli.Context) (v1.Platform, error) {
	s := c.String("platform")
	if s == "" {
		return store.DefaultPlatform(), nil
	}
	p, err := v1.ParsePlatform(s)
	if err != nil || p.OS == "" || p.Architecture == "" {
		return v1.Platform{}, fmt.Errorf("--platform %q: want os/arch[/variant], e.g. linux/amd64", s)
	}
	return *p, nil
}

func oneArg(c *cli.Context, what string) (string, error) {
	if c.NArg() != 1 {
		return "", fmt.Errorf("%s: expected exactly one %s, got %d arguments", c.Command.FullName(), what, c.NArg())
	}
	return c.Args().First(), nil
}

func imageLoad(c *cli.Context) error {
	file, err := oneArg(c, "FILE")
	if err != nil {
		return err
	}
	plat, err := parsePlatform(c)
	if err != nil {
		return err
	}
	s, err := openImageStore(c)
	if err != nil {
		return err
	}
	prog := newImageProgress(c.App.ErrWriter, filepath.Base(file), false)
	res, err := s.Load(c.Context, file, store.LoadOptions{Tag: c.String("tag"), Platform: plat, Progress: prog.update})
	prog.end()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "found %s\n", res.Format)
	for _, e := range res.Entries {
		fmt.Fprintf(c.App.Writer, "loaded %s %s\n", e.Ref, e.Manifest)
	}
	return nil
}

func imagePull(c *cli.Context) error {
	ref, err := oneArg(c, "REF")
	if err != nil {
		return err
	}
	plat, err := parsePlatform(c)
	if err != nil {
		return err
	}
	s, err := openImageStore(c)
	if err != nil {
		return err
	}
	before, err := s.List()
	if err != nil {
		return err
	}
	prog := newImageProgress(c.App.ErrWriter, ref, true)
	e, err := registry.Pull(c.Context, s, ref, registry.PullOptions{Platform: plat, Insecure: c.Bool("insecure"), Progress: prog.update})
	if err != nil {
		prog.end()
		return err
	}
	prog.finish(slices.ContainsFunc(before, func(b store.Entry) bool { return b.Ref == e.Ref && b.Manifest == e.Manifest }))
	fmt.Fprintf(c.App.Writer, "pulled %s %s\n", e.Ref, e.Manifest)
	return nil
}

func imageList(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("%s takes no arguments", c.Command.FullName())
	}
	s, err := openImageStore(c)
	if err != nil {
		return err
	}
	es, err := s.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REFERENCE\tDIGEST\tSIZE\tCREATED")
	for _, e := range es {
		created := "-"
		if !e.Created.IsZero() && e.Created.Unix() != 0 {
			created = e.Created.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Ref, e.Manifest, humanSize(e.Size), created)
	}
	return tw.Flush()
}

func imageRemove(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("%s: name at least one REF", c.Command.FullName())
	}
	s, err := openImageStore(c)
	if err != nil {
		return err
	}
	var errs []error
	for _, ref := range c.Args().Slice() {
		e, err := s.Remove(ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(c.App.Writer, "removed %s\n", e.Ref)
	}
	return errors.Join(errs...)
}

func imagePrune(c *cli.Context) error {
	s, err := openImageStore(c)
	if err != nil {
		return err
	}
	res, err := s.Prune()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "deleted %d blobs (%s), %d abandoned stagings\n", res.Blobs, humanSize(res.Bytes), res.Stagings)
	return nil
}

func jsonArgv(flag, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("--%s %q: want a JSON array of strings, e.g. [\"/bin/sh\",\"-c\"]: %w", flag, s, err)
	}
	return v, nil
}

func imageBuildDir(c *cli.Context) error {
	dir, err := oneArg(c, "DIR")
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("build directory: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("build directory %q is not a directory", dir)
	}
	entry, err := jsonArgv("entrypoint", c.String("entrypoint"))
	if err != nil {
		return err
	}
	cmd, err := jsonArgv("cmd", c.String("cmd"))
	if err != nil {
		return err
	}
	env := c.Generic("env").(*repeated).values
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("--env %q: want NAME=VALUE", kv)
		}
	}
	plat, err := parsePlatform(c)
	if err != nil {
		return err
	}
	var stamp time.Time
	if e := c.Int64("source-date-epoch"); e >= 0 {
		stamp = time.Unix(e, 0)
	}
	layer, err := build.Layer(dir, build.Options{Time: stamp})
	if err != nil {
		return err
	}
	img, err := build.Image([]v1.Layer{layer}, build.Config{
		Entrypoint: entry, Cmd: cmd, Env: env,
		User: c.String("user"), WorkingDir: c.String("workdir"),
		Platform: plat, Created: stamp,
	})
	if err != nil {
		return err
	}
	if out := c.String("output"); out != "" {
		ref, err := name.NewTag(c.String("tag"))
		if err != nil {
			return fmt.Errorf("--tag %q: %w", c.String("tag"), err)
		}
		if err := writeArchive(out, ref, img); err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "wrote %s %s to %s\n", ref, digest, out)
		return nil
	}
	s, err := openImageStore(c)
	if err != nil {
		return err
	}
	e, err := s.Put(c.Context, c.String("tag"), img, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "stored %s %s\n", e.Ref, e.Manifest)
	return nil
}

// writeArchive writes img as a docker-archive tar at path, through a
// temporary file renamed into place, so a failed write leaves no archive.
func writeArchive(path string, ref name.Tag, img v1.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(ref, img, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

func humanSize(n int64) string {
	const unit = 1000
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
