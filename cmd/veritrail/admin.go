package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/veritrail/veritrail/ingest/auth"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/cmd/veritrail/config"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// adminAction does one admin subcommand; open opens the store of the settings (--postgres,
// else --data-dir), which the action closes.
type adminAction func(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error

func adminCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "manage organizations, users and API keys",
		Long: `Manage organizations, users and API keys, against --postgres when given, else the SQLite store in
--data-dir (both also from the config file and the environment, as for serve).`,
		Args: noSubcommand,
		RunE: groupRun,
	}
	var displayName string
	createUser := adminSubcommand("create-user NAME", "create a user", 1, func(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error {
		d := displayName
		if d == "" {
			d = args[0]
		}
		return withStore(open, func(st store.Store) error {
			if err := st.CreateUser(ctx, store.User{ID: uuid.NewString(), Name: args[0], DisplayName: d, CreatedAt: now()}); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "created user %s\n", args[0])
			return err
		})
	})
	createUser.Flags().StringVar(&displayName, "display-name", "", "display name of the user (default: NAME)")

	var memberRole string
	addMember := adminSubcommand("add-member USER ORG", "make USER a member of ORG", 2, func(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error {
		r, err := role(memberRole)
		if err != nil {
			return err
		}
		return withStore(open, func(st store.Store) error {
			u, err := userByName(ctx, st, args[0])
			if err != nil {
				return err
			}
			o, err := st.OrgByName(ctx, args[1])
			if err != nil {
				return fmt.Errorf("organization %q: %w", args[1], err)
			}
			if err := st.AddMember(ctx, u.ID, o.ID, r); err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "%s is now %s of %s\n", args[0], r, args[1])
			return err
		})
	})
	addMember.Flags().StringVar(&memberRole, "role", "admin", "role: admin, member, snapshotter or reader")

	// Every process applies the store's migrations when it opens it; this applies them alone, as
	// a deployment's pre-install or pre-upgrade job does before the tiers roll.
	migrateCmd := adminSubcommand("migrate", "apply the store's schema migrations and exit", 0, func(ctx context.Context, w io.Writer, open func() (store.Store, error), _ []string) error {
		return withStore(open, func(store.Store) error {
			_, err := fmt.Fprintln(w, "the store's migrations are applied")
			return err
		})
	})

	var wipeConfirmed bool
	wipe := adminSubcommand("wipe", "delete everything in the store (test environments only)", 0, func(ctx context.Context, w io.Writer, open func() (store.Store, error), _ []string) error {
		if !wipeConfirmed {
			return errors.New("wipe deletes every organization, key and piece of evidence: refusing without --yes-really")
		}
		return withStore(open, func(st store.Store) error {
			if err := st.Wipe(ctx); err != nil {
				return err
			}
			_, err := fmt.Fprintln(w, "the store is empty")
			return err
		})
	})
	wipe.Flags().BoolVar(&wipeConfirmed, "yes-really", false, "confirm wipe")

	cmd.AddCommand(
		adminSubcommand("create-org NAME", "create an organization", 1, createOrg),
		makePublic("make-public", true), makePublic("make-private", false),
		createUser, addMember, createKeyCommand(), migrateCmd,
		adminSubcommand("seed FILE", "create the users, organizations, memberships, service accounts and keys a YAML file lists; "+
			"running it again changes nothing (see docs/ARCHITECTURE.md for the format)", 1, seed),
		wipe, rejectedMessagesCommand(), replayCommand(),
	)
	return cmd
}

// adminSubcommand is an admin subcommand taking nargs arguments (-1: any number), with the
// settings that find the store.
func adminSubcommand(use, short string, nargs int, action adminAction) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if nargs >= 0 && len(args) != nargs {
			return fmt.Errorf("usage: %s", cmd.UseLine())
		}
		return nil
	}
	settings := config.Bind(cmd.Flags(), "admin")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := settings.Load(os.Environ())
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		open := func() (store.Store, error) {
			if s.Postgres != "" {
				return sqlstore.OpenPostgres(ctx, s.Postgres)
			}
			if err := os.MkdirAll(s.DataDir, 0o750); err != nil {
				return nil, fmt.Errorf("create data dir: %w", err)
			}
			return sqlstore.OpenSQLite(ctx, filepath.Join(s.DataDir, "state.db"))
		}
		return action(ctx, cmd.OutOrStdout(), open, args)
	}
	return cmd
}

// withStore opens the store, runs f and closes the store.
func withStore(open func() (store.Store, error), f func(store.Store) error) error {
	st, err := open()
	if err != nil {
		return err
	}
	return errors.Join(f(st), st.Close())
}

func now() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

func role(name string) (store.Role, error) {
	r := store.Role(name)
	if !r.Valid() {
		return "", fmt.Errorf("--role must be one of %v, not %q", store.Roles(), name)
	}
	return r, nil
}

func createOrg(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error {
	return withStore(open, func(st store.Store) error {
		if _, err := st.OrgByName(ctx, args[0]); err == nil {
			return fmt.Errorf("organization %q already exists", args[0])
		}
		if _, err := app.EnsureOrg(ctx, st, args[0]); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "created organization %s\n", args[0])
		return err
	})
}

func makePublic(name string, public bool) *cobra.Command {
	short := "let anyone read ORG's flows, trails, artifacts, environments and snapshots without a key"
	if !public {
		short = "stop letting anyone read ORG without a key"
	}
	return adminSubcommand(name+" ORG", short, 1, func(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error {
		return withStore(open, func(st store.Store) error {
			o, err := st.OrgByName(ctx, args[0])
			if err != nil {
				return fmt.Errorf("organization %q: %w", args[0], err)
			}
			if err := st.SetOrgPublic(ctx, o.ID, public); err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "organization %s is now %s\n", args[0], strings.TrimPrefix(name, "make-"))
			return err
		})
	})
}

func createKeyCommand() *cobra.Command {
	var org, user, name, roleName, secret string
	cmd := adminSubcommand("create-key", "create a key of ORG's service account (--org) or a personal API key (--user) and print its secret", 0,
		func(ctx context.Context, w io.Writer, open func() (store.Store, error), _ []string) error {
			r, err := role(roleName)
			if err != nil {
				return err
			}
			if (org == "") == (user == "") {
				return errors.New("create-key needs exactly one of --org or --user")
			}
			s := secret
			if s == "" {
				s = app.NewSecret()
			}
			return withStore(open, func(st store.Store) error {
				if org != "" {
					o, err := st.OrgByName(ctx, org)
					if err != nil {
						return fmt.Errorf("organization %q: %w", org, err)
					}
					n := name
					if n == "" {
						n = "api-key"
					}
					if err := app.CreateOrgKey(ctx, st, o, n, r, s); err != nil {
						return err
					}
				} else {
					u, err := userByName(ctx, st, user)
					if err != nil {
						return err
					}
					if err := st.CreateKey(ctx, store.APIKey{ID: uuid.NewString(), Hash: auth.HashKey(s), UserID: u.ID, Name: u.DisplayName,
						Role: store.RoleReader}); err != nil {
						return err
					}
				}
				_, err := fmt.Fprintln(w, s)
				return err
			})
		})
	cmd.Long = `Create an API key and print its secret: with --org, a key of the organization's service account
--name (created with privilege --role if missing); with --user, a personal key that works in each of
the user's organizations.`
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "organization of the key")
	f.StringVar(&user, "user", "", "user of a personal key")
	f.StringVar(&name, "name", "", "service account of an organization key, shown as created_by (default api-key)")
	f.StringVar(&roleName, "role", "admin", "privilege of a service account created for the key: admin, member, snapshotter or reader")
	f.StringVar(&secret, "secret", "", "use this secret instead of a random one (e.g. from a secrets manager)")
	return cmd
}

func seed(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error {
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	sd, err := app.ParseSeed(b) // before opening the store: a bad file changes nothing
	if err != nil {
		return err
	}
	return withStore(open, func(st store.Store) error {
		if err := app.ApplySeed(ctx, st, sd); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "seeded %d organizations and %d users from %s\n", len(sd.Organizations), len(sd.Users), args[0])
		return err
	})
}

func rejectedMessagesCommand() *cobra.Command {
	var state string
	var asJSON bool
	cmd := adminSubcommand("rejected-messages [ORG]", "list the messages the evaluator could never apply (dead letters), newest first, of ORG or of every organization", -1,
		func(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error {
			if len(args) > 1 {
				return errors.New("usage: veritrail admin rejected-messages [ORG] [--state S] [--json]")
			}
			org := ""
			if len(args) == 1 {
				org = args[0]
			}
			return withStore(open, func(st store.Store) error {
				return app.ListRejected(ctx, st, w, org, store.ReplayState(state), asJSON)
			})
		})
	cmd.Flags().StringVar(&state, "state", "", "only rejected messages in this state: rejected, replay_requested or replayed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line, with its payload")
	return cmd
}

func replayCommand() *cobra.Command {
	var all bool
	var wait time.Duration
	cmd := adminSubcommand("replay ORG [ID]", "ask the evaluators to apply a rejected message of ORG again (or all of ORG's), once its cause is fixed, and print the outcomes", -1,
		func(ctx context.Context, w io.Writer, open func() (store.Store, error), args []string) error {
			id := ""
			switch {
			case len(args) == 2 && !all:
				id = args[1]
			case len(args) == 1 && all:
			default:
				return errors.New("usage: veritrail admin replay ORG ID, or veritrail admin replay ORG --all")
			}
			return withStore(open, func(st store.Store) error {
				return app.ReplayRejected(ctx, st, w, args[0], id, wait)
			})
		})
	cmd.Flags().BoolVar(&all, "all", false, "replay every rejected message of the organization")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the evaluators' outcomes")
	return cmd
}

func userByName(ctx context.Context, st store.Store, name string) (store.User, error) {
	u, err := st.UserByName(ctx, name)
	if err != nil {
		return u, fmt.Errorf("user %q: %w", name, err)
	}
	return u, nil
}
