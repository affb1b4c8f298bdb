// Package reliability holds swarm's slow reliability suite: end-to-end tests
// that run the real swarm binary against throw-away repositories and try to
// break it. They are built only with the reliability tag:
//
//	make reliability                       # builds bin/swarm, then runs them
//	go test -tags reliability ./reliability/ -v
//
// SWARM_BIN names the binary to test; without it the suite builds one.
// RELIABILITY_SEED fixes the random seed (every test prints the one it
// used, so a failure can be replayed).
//
//	R1 crash:   kill -9 of `swarm up` at random moments of a scripted run
//	            with mail flowing both ways, and the invariants after each
//	            restart (every message exists, none in two completed
//	            sessions, session numbers only grow, committed work intact,
//	            PRAGMA integrity_check); and, on a repository of 20,000
//	            files, SIGINT and kill -9 inside the git commands of `swarm
//	            down --merge/--squash` (merge, squash, its commit, worktree
//	            remove) and of a first `swarm up` (worktree add, checkout),
//	            each followed by `swarm down` until it succeeds: every
//	            original file intact, the agents' work on main, no git lock;
//	            the MERGE_HEAD window of `git merge` hit on purpose; and
//	            kill -9 and SIGINT of `swarm workflow merge` (1,300 files
//	            changed) at random moments and inside the landing's git
//	            commands: main at its old commit or the merge, the item
//	            merged only when main holds it, the next run finishing it
//	            (RELIABILITY_MERGE_ROUNDS per signal, default 6); and kill -9
//	            and SIGINT of `swarm up` while its merge queue lands what
//	            `swarm land dev` queued (with and without a [merge] ci, at
//	            random moments and inside the scratch worktree's add, the
//	            landing's commit-tree, update-ref and read-tree): main at
//	            its old commit or the one merge, the checkout never
//	            half-merged before the move, the next `swarm up` landing it
//	            exactly once, every file, no lock, no journal entry left
//	R2 senders: 8 sender processes × 1,000 messages while a swarm runs
//	R4 escapes: through `swarm up --engine script`, agents that commit on
//	            the base branch (as themselves, and under another name),
//	            leave their branch, rewind the base, move a teammate's
//	            branch: each is reported to operator (without the
//	            sandbox); a detached process that would commit late ends
//	            with its session instead
//	R5 secrets: a gemini session against a fake server; the API key is
//	            nowhere in the database, logs, prompts or tool environment
//	R6 sources: bd hanging, missing or printing garbage; git missing
//	R7 lock:    two `swarm up` started at the same moment, 20 times
//	R8 down:    Ctrl-C and kill -9 of `swarm down --merge` 20 times on the
//	            20,000-file repository; the next one succeeds, nothing lost
//	R9 hosts:   two clones' supervisors on one PostgreSQL swarm, 8 senders
//	            × 1,000 messages across a kill -9 of one supervisor and a
//	            pg_ctl restart: each stored once, each done in a completed
//	            session, no error logged (skipped without PostgreSQL unless
//	            SWARM_REQUIRE_POSTGRES is set, as in CI)
//
// The fast checks (the sandbox escape table, the prompt sources, the fuzz
// seed corpora) run in plain `go test`; R3's fuzzing runs from `make fuzz`.
package reliability
