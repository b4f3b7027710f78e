// Package store is robot-bridge's durable memory (ARCHITECTURE.md, invariant
// 8): by default one SQLite file in the data dir, opened through the
// pure-Go driver modernc.org/sqlite in WAL mode with synchronous=FULL, or
// (Conf.Driver postgres) a PostgreSQL database reached through pgx with
// synchronous_commit=on — either way a record is on the disk when its
// write returns and a crash of the bridge — kill -9 included — loses
// nothing that was acknowledged. Both engines run the same code over
// database/sql; a dialect (engine.go) covers what differs, and each has
// its own versioned migrations (migrations/<engine>/). A database that
// cannot be reached is ErrUnavailable, never retried inside the store,
// and the store resumes when it is back (docs/DESIGN.md §3.7).
//
// It holds tasks and every lifecycle transition, approval requests and
// decisions, grants, safety events (e-stop, faults, monitor trips, stops),
// the e-stop and fault latches, idempotency keys and the audit trail
// (who, what, when, why, with JSON details). The schema is versioned:
// forward-only migrations, each in its own transaction, recorded in
// schema_migrations.
//
// One store serves a fleet: tasks, transitions, safety events and audit
// records carry the robot they are about (robot_id, the hw-config
// robot.id; the audit API filters by it), and the latches are kept per
// robot, keyed by (robot_id, name), so an e-stop of one robot holds that
// robot only and a reset of one clears only its own. Rows written before
// the store knew robots (migration 4) have robot_id "": "legacy", from a
// single-robot bridge. An active legacy latch applies to every robot
// (Latches), so an e-stop latched before the bridge named its robots
// cannot vanish because it now does; the first Recover that is given the
// bridge's robots (RecoverInput.Robots) hands it to each of them and
// deletes the legacy rows. A store used without robot ids behaves as the
// single-robot store always did.
//
// Writes come in two speeds. Records that authorize or imply a motion —
// transitions (actions.Recorder), approvals and grants (approval.Store),
// idempotency keys (toolapi.IdempotencyStore) — are written synchronously,
// before the command they imply leaves the bridge. Safety events and task
// progress are fed through a bounded queue to one writer goroutine that
// commits them in batches: the stop path only ever enqueues, never waits on
// the disk, and a full queue is counted and logged, never blocking. Latch
// changes — e-stop pressed or reset, fault latched or cleared — never share
// that queue: they travel in their own unbounded lane to the same writer,
// committed in order with the events around them, never dropped, and tried
// again until written when a commit fails (Healthy reports them meanwhile).
// SyncLatches waits until they are committed; the bridge answers an
// operator's e-stop, reset or clear only then, after the stop has gone out,
// so an acknowledged e-stop survives a crash.
//
// Every write, of either speed, is committed through one group commit
// (group.go): the writer that finds no commit in progress leads, taking
// what is queued at that moment into one transaction — one fsync for the
// transitions of several robots that move at once — and the writers that
// queue meanwhile are led by the first of them as soon as that commit is
// done. Nothing waits for company (there is no timer), every caller
// returns once its own write is committed, a write whose statements fail
// is rolled back alone (a savepoint each), and a commit that fails fails
// every write of its group. RecordTransitions writes several transitions
// in one transaction: the runner's created, approved and executing of a
// call authorized when it is made, before its first command. The hot
// writes' statements are prepared once, at Open.
//
// A run that finds the store still marked running — the previous process
// was killed or crashed — reports it in Info.CleanShutdown, and the store
// keeps knowing it until a run has recovered it (Recover), so a start that
// fails after a crash does not make the crash forgotten. Recover records
// the fault the bridge latches for it (RecoverInput.CrashFault), for every
// robot of the bridge.
//
// A data dir remembers that it had a store: a marker file written next to
// the database the first time it is created (for PostgreSQL, naming the
// store it used). A missing or empty database with a marker, another
// store's database, or a SQLite file that fails quick_check, is a clear
// error at Open, never a silent empty start that would forget a latched
// fault.
//
// On start the bridge calls Recover before its API opens: every task found
// live becomes interrupted (the transition and an audit record written),
// pending approvals expire, grants from before the restart are revoked,
// half-done idempotency reservations are settled, and the restart itself is
// audited. Audit reads the trail with filters and an opaque paging cursor;
// NewAuditHandler serves it as GET /v1/audit and GET /v1/audit/export
// (JSON lines).
//
// # Cluster mode
//
// Several bridges may share one PostgreSQL store in front of one fleet
// (Conf.BridgeID, an id per bridge; SQLite refuses it with
// ErrClusterNeedsPostgres). Each bridge takes the store's owner lock
// shared and an exclusive lock of its own id, so the cluster's bridges
// run side by side, a bridge without an id and a cluster exclude each
// other, and two processes with one id cannot both run (ErrLocked names
// the id). Every write transaction still takes the database-wide write
// lock and checks that its process holds both locks, so a run that lost
// its session (and was replaced by a new run of its id) writes nothing
// more — not even a lease renewal. The crash memory is per bridge
// (meta running:<id>, unclean:<id>; Info.CleanShutdown is this bridge's),
// idempotency keys are global but remember the bridge that reserved them,
// and Recover touches only its bridge's robots (RecoverInput.Robots, then
// required) and its reservations. Legacy latch rows (robot "") are handed
// to the bridge's robots but kept, as they hold the other bridges' robots
// too.
//
// Robots are owned through leases (leases.go): one row per robot, never
// deleted, with an owner bridge, the owner's run (Info.Instance), an epoch
// that grows by one on every acquisition, and an expiry on the DATABASE's
// clock (clock_timestamp(), Unix ns), so the bridges agree on expiry
// whatever their own clocks say; Lease.Remaining is measured from the
// database's now at the read. AcquireLease takes a free lease (none,
// released, or this bridge id's own) or, with AcquireExpired, another
// bridge's expired one; RenewLeases extends, in one statement, every
// unexpired lease of this run and reports which it holds, so a lease
// that expired is never silently revived; ReleaseLeases hands leases
// back. A bridge measures its lease from the moment it called
// AcquireLease or RenewLeases plus the ttl, on its own monotonic clock:
// that never ends later than the database's expiry. TakeOver is the
// failover of one robot in one transaction: the lease at a new epoch,
// the robot's live tasks interrupted (as Recover does, naming the bridge
// that went silent), its pending approvals expired, its grants ended, and
// an audit record. Robots refuse motion commands of an older epoch
// (robot.Command.Epoch), which fences a bridge that lost its lease.
// Acquisitions, releases and failovers are audited (lease.acquired,
// lease.released, lease.failover; their At is the store's clock, the
// database's times are in the lease).
//
// The bridges hear each other through PostgreSQL LISTEN/NOTIFY on one
// channel, robot_bridge (notify.go): latch changes, approvals, grants,
// task transitions, leases and mail are announced inside the transaction
// that writes them (delivered on commit), as compact JSON naming only
// ids. Listen holds its own connection, reconnects with a backoff, and
// delivers a resync notice first after every connect and after it had to
// drop notices for a slow consumer, so a consumer that re-reads on resync
// misses nothing. Operator actions for a robot another bridge owns travel
// through the mailbox table (mailbox.go): PostMail, TakeMail (pending →
// taken), AnswerMail (taken → answered), AbandonMail (pending →
// abandoned), each a compare-and-set, so an action runs at most once and
// the sender learns which happened; mail older than MailMaxAge is
// abandoned, never run late. The bridges table lists the cluster's
// bridges with their advertised URL and their last renewal (Bridges).
package store
