// Aurora-compatible scheduler API served by the Peloton aurorabridge.
//
// Wire-compatible with Apache Aurora's api.thrift (same names, field ids,
// types, requiredness, enum values and constants), plus a handful of older
// fields (TaskConfig 8/9/10/21, ResourceAggregate 1/2/3) that some Aurora
// clients still send. Field and argument ids are part of the wire format and
// must never be renumbered; declaration order is kept stable because the
// generated constructors take their positional arguments in that order.

namespace java org.apache.aurora.gen
namespace py gen.apache.aurora.api
namespace go aurora.api

// ---------------------------------------------------------------------------
// Common values
// ---------------------------------------------------------------------------

// Outcome of an API call; only OK responses carry a result.
enum ResponseCode {
  INVALID_REQUEST    = 0,
  OK                 = 1,
  ERROR              = 2,
  WARNING            = 3,
  AUTH_FAILED        = 4,
  JOB_UPDATING_ERROR = 5,  // blocked by a job update in progress
  ERROR_TRANSIENT    = 6,  // temporary failure, retry later
}

const string AURORA_EXECUTOR_NAME = "AuroraExecutor"

// Legacy owner record; only the user is still meaningful.
struct Identity {
  2: string user
}

// ---------------------------------------------------------------------------
// Hosts and placement constraints
// ---------------------------------------------------------------------------

// One named attribute of an agent host.
struct Attribute {
  1: string name
  2: set<string> values
}

enum MaintenanceMode {
  NONE      = 1,
  SCHEDULED = 2,
  DRAINING  = 3,
  DRAINED   = 4,
}

// All attributes of one agent host.
struct HostAttributes {
  1: string host
  2: set<Attribute> attributes
  3: optional MaintenanceMode mode
  4: optional string slaveId
}

// Host must (or, if negated, must not) carry one of these attribute values.
struct ValueConstraint {
  1: bool negated
  2: set<string> values
}

// At most `limit` active tasks per distinct attribute value.
struct LimitConstraint {
  1: i32 limit
}

union TaskConstraint {
  1: ValueConstraint value
  2: LimitConstraint limit
}

// A placement constraint on the host attribute called `name`.
struct Constraint {
  1: string name
  2: TaskConstraint constraint
}

struct Package {
  1: string role
  2: string name
  3: i32 version
}

// Free-form key/value pair attached to tasks and updates.
struct Metadata {
  1: string key
  2: string value
}

// ---------------------------------------------------------------------------
// Identifiers
// ---------------------------------------------------------------------------

// role/environment/name triple naming a job.
struct JobKey {
  1: string role
  2: string environment
  3: string name
}

// Deprecated job lock key.
union LockKey {
  1: JobKey job
}

// Deprecated job lock.
struct Lock {
  1: LockKey key
  2: string token
  3: string user
  4: i64 timestampMs
  5: optional string message
}

// One instance of a job.
struct InstanceKey {
  1: JobKey jobKey
  2: i32 instanceId
}

// ---------------------------------------------------------------------------
// Task configuration
// ---------------------------------------------------------------------------

// A file for the Mesos fetcher to download into the sandbox.
struct MesosFetcherURI {
  1: string value
  2: optional bool extract
  3: optional bool cache
  4: optional string outputFile
}

// Executor name plus its opaque configuration blob.
struct ExecutorConfig {
  1: string name
  2: string data
}

// Access mode of a mounted volume.
enum Mode {
  RW = 1,
  RO = 2,
}

// Host path mounted into the container.
struct Volume {
  1: string containerPath
  2: string hostPath
  3: Mode mode
}

struct DockerImage {
  1: string name
  2: string tag
}

struct AppcImage {
  1: string name
  2: string imageId
}

// Filesystem image for the Mesos containerizer.
union Image {
  1: DockerImage docker
  2: AppcImage appc
}

// Mesos (unified) containerizer settings; the default container type.
struct MesosContainer {
  1: optional Image image
  2: optional list<Volume> volumes
}

// A `--name=value` option handed to the docker CLI.
struct DockerParameter {
  1: string name
  2: string value
}

struct DockerContainer {
  1: string image
  2: optional list<DockerParameter> parameters
}

union Container {
  1: MesosContainer mesos
  2: DockerContainer docker
}

// One resource requirement; exactly one member is set.
union Resource {
  1: double numCpus
  2: i64 ramMb
  3: i64 diskMb
  4: string namedPort
  5: i64 numGpus
}

// What to do with a task whose agent becomes partitioned.
struct PartitionPolicy {
  1: bool reschedule
  2: optional i64 delaySecs
}

// Keep `percentage` of instances running for at least `durationSecs`.
struct PercentageSlaPolicy {
  1: double percentage
  2: i64 durationSecs
}

// Keep `count` instances running for at least `durationSecs`.
struct CountSlaPolicy {
  1: i64 count
  2: i64 durationSecs
}

// Ask an external HTTP coordinator whether an instance may be disrupted.
struct CoordinatorSlaPolicy {
  1: string coordinatorUrl
  2: string statusKey
}

union SlaPolicy {
  1: PercentageSlaPolicy percentageSlaPolicy
  2: CountSlaPolicy countSlaPolicy
  3: CoordinatorSlaPolicy coordinatorSlaPolicy
}

// Everything needed to run one task of a job.
struct TaskConfig {
  28: JobKey job
  17: Identity owner
   7: bool isService
  11: i32 priority
  13: i32 maxTaskFailures
  18: optional bool production
  30: optional string tier
  32: set<Resource> resources
  20: set<Constraint> constraints
  33: optional set<MesosFetcherURI> mesosFetcherUris
  22: optional map<string, string> taskLinks
  23: optional string contactEmail
  25: optional ExecutorConfig executorConfig
  27: optional set<Metadata> metadata
  34: optional PartitionPolicy partitionPolicy
  35: optional SlaPolicy slaPolicy
  29: Container container = {"mesos": {}}
  // Pre-`resources` scalar fields, accepted from older clients.
   8: optional double numCpus
   9: optional i64 ramMb
  10: optional i64 diskMb
  21: optional set<string> requestedPorts
}

// A bundle of resources, e.g. a role's quota.
struct ResourceAggregate {
   4: set<Resource> resources
  // Pre-`resources` scalar fields, accepted from older clients.
   1: optional double numCpus
   2: optional i64 ramMb
   3: optional i64 diskMb
}

// How a cron run is handled while the previous run is still active.
enum CronCollisionPolicy {
  KILL_EXISTING = 0,
  CANCEL_NEW    = 1,
  RUN_OVERLAP   = 2,  // deprecated
}

// A job: `instanceCount` copies of `taskConfig`, optionally on a cron schedule.
struct JobConfiguration {
  9: JobKey key
  7: Identity owner
  4: optional string cronSchedule
  5: CronCollisionPolicy cronCollisionPolicy
  6: TaskConfig taskConfig
  8: i32 instanceCount
}

// Task counts of a job by coarse state.
struct JobStats {
  1: i32 activeTaskCount
  2: i32 finishedTaskCount
  3: i32 failedTaskCount
  4: i32 pendingTaskCount
}

struct JobSummary {
  1: JobConfiguration job
  2: JobStats stats
  3: optional i64 nextCronRunMs
}

// Inclusive range [first, last].
struct Range {
  1: i32 first
  2: i32 last
}

// Instances that share one task configuration.
struct ConfigGroup {
  1: TaskConfig config
  3: set<Range> instances
}

struct ConfigSummary {
  1: JobKey key
  2: set<ConfigGroup> groups
}

struct PopulateJobResult {
  2: TaskConfig taskConfig
}

// Quota of a role and what is consumed against it.
struct GetQuotaResult {
  1: ResourceAggregate quota
  2: optional ResourceAggregate prodSharedConsumption
  3: optional ResourceAggregate nonProdSharedConsumption
  4: optional ResourceAggregate prodDedicatedConsumption
  5: optional ResourceAggregate nonProdDedicatedConsumption
}

// ---------------------------------------------------------------------------
// Task state
// ---------------------------------------------------------------------------

// Lifecycle states of a task.
enum ScheduleStatus {
  PENDING     = 0,
  STARTING    = 1,
  RUNNING     = 2,
  FINISHED    = 3,
  FAILED      = 4,
  KILLED      = 5,
  KILLING     = 6,
  LOST        = 7,
  ASSIGNED    = 9,
  INIT        = 11,
  RESTARTING  = 12,
  PREEMPTING  = 13,
  THROTTLED   = 16,
  DRAINING    = 17,
  PARTITIONED = 18,
}

// Non-terminal states.
const set<ScheduleStatus> ACTIVE_STATES = [
  ScheduleStatus.PENDING,
  ScheduleStatus.THROTTLED,
  ScheduleStatus.ASSIGNED,
  ScheduleStatus.STARTING,
  ScheduleStatus.RUNNING,
  ScheduleStatus.PARTITIONED,
  ScheduleStatus.KILLING,
  ScheduleStatus.PREEMPTING,
  ScheduleStatus.RESTARTING,
  ScheduleStatus.DRAINING,
]

// Non-terminal states in which the task is bound to an agent.
const set<ScheduleStatus> SLAVE_ASSIGNED_STATES = [
  ScheduleStatus.ASSIGNED,
  ScheduleStatus.STARTING,
  ScheduleStatus.RUNNING,
  ScheduleStatus.PARTITIONED,
  ScheduleStatus.KILLING,
  ScheduleStatus.PREEMPTING,
  ScheduleStatus.RESTARTING,
  ScheduleStatus.DRAINING,
]

// States in which the task's sandbox is live.
const set<ScheduleStatus> LIVE_STATES = [
  ScheduleStatus.RUNNING,
  ScheduleStatus.PARTITIONED,
  ScheduleStatus.KILLING,
  ScheduleStatus.PREEMPTING,
  ScheduleStatus.RESTARTING,
  ScheduleStatus.DRAINING,
]

// Final states.
const set<ScheduleStatus> TERMINAL_STATES = [
  ScheduleStatus.FINISHED,
  ScheduleStatus.FAILED,
  ScheduleStatus.KILLED,
  ScheduleStatus.LOST,
]

// Allowed characters in role, environment and job name.
const string GOOD_IDENTIFIER_PATTERN = "^[\\w\\-\\.]+$"
const string GOOD_IDENTIFIER_PATTERN_JVM = GOOD_IDENTIFIER_PATTERN
const string GOOD_IDENTIFIER_PATTERN_PYTHON = GOOD_IDENTIFIER_PATTERN

// One state transition of a task.
struct TaskEvent {
  1: i64 timestamp
  2: ScheduleStatus status
  3: optional string message
  4: optional string scheduler
}

// A task bound (or to be bound) to an agent, with its instance id and ports.
struct AssignedTask {
  1: string taskId
  2: string slaveId
  3: string slaveHost
  4: TaskConfig task
  5: map<string, i32> assignedPorts
  6: i32 instanceId
}

// A task with its current status and history.
struct ScheduledTask {
  1: AssignedTask assignedTask
  2: ScheduleStatus status
  3: i32 failureCount
  6: i32 timesPartitioned
  4: list<TaskEvent> taskEvents
  5: string ancestorId
}

struct ScheduleStatusResult {
  1: list<ScheduledTask> tasks
}

struct GetJobsResult {
  1: set<JobConfiguration> configs
}

// Task filter; all set terms must match.
struct TaskQuery {
  14: optional string role
   9: optional string environment
   2: optional string jobName
   4: optional set<string> taskIds
   5: optional set<ScheduleStatus> statuses
   7: optional set<i32> instanceIds
  10: optional set<string> slaveHosts
  11: optional set<JobKey> jobKeys
  12: optional i32 offset
  13: optional i32 limit
}

struct HostStatus {
  1: string host
  2: MaintenanceMode mode
}

struct RoleSummary {
  1: string role
  2: i32 jobCount
  3: i32 cronJobCount
}

struct Hosts {
  1: set<string> hostNames
}

// Why a task is still PENDING.
struct PendingReason {
  1: string taskId
  2: string reason
}

// ---------------------------------------------------------------------------
// Job updates
// ---------------------------------------------------------------------------

// Lifecycle states of a job update.
enum JobUpdateStatus {
  ROLLING_FORWARD             = 0,
  ROLLING_BACK                = 1,
  ROLL_FORWARD_PAUSED         = 2,
  ROLL_BACK_PAUSED            = 3,
  ROLLED_FORWARD              = 4,
  ROLLED_BACK                 = 5,
  ABORTED                     = 6,
  ERROR                       = 7,
  FAILED                      = 8,
  ROLL_FORWARD_AWAITING_PULSE = 9,
  ROLL_BACK_AWAITING_PULSE    = 10,
}

// Non-terminal update states.
const set<JobUpdateStatus> ACTIVE_JOB_UPDATE_STATES = [
  JobUpdateStatus.ROLLING_FORWARD,
  JobUpdateStatus.ROLLING_BACK,
  JobUpdateStatus.ROLL_FORWARD_PAUSED,
  JobUpdateStatus.ROLL_BACK_PAUSED,
  JobUpdateStatus.ROLL_FORWARD_AWAITING_PULSE,
  JobUpdateStatus.ROLL_BACK_AWAITING_PULSE,
]

// Update states blocked on a pulse. The misspelled name is part of the API.
const set<JobUpdateStatus> AWAITNG_PULSE_JOB_UPDATE_STATES = [
  JobUpdateStatus.ROLL_FORWARD_AWAITING_PULSE,
  JobUpdateStatus.ROLL_BACK_AWAITING_PULSE,
]

// Per-instance step recorded while an update runs.
enum JobUpdateAction {
  INSTANCE_UPDATED         = 1,
  INSTANCE_ROLLED_BACK     = 2,
  INSTANCE_UPDATING        = 3,
  INSTANCE_ROLLING_BACK    = 4,
  INSTANCE_UPDATE_FAILED   = 5,
  INSTANCE_ROLLBACK_FAILED = 6,
}

// Answer to pulseJobUpdate: still running or already done.
enum JobUpdatePulseStatus {
  OK       = 1,
  FINISHED = 2,
}

// Names one update of one job.
struct JobUpdateKey {
  1: JobKey job
  2: string id
}

// At most groupSize instances change at any moment.
struct QueueJobUpdateStrategy {
  1: i32 groupSize
}

// Fixed-size batches, each finished before the next starts.
struct BatchJobUpdateStrategy {
  1: i32 groupSize
  2: bool autopauseAfterBatch
}

// Like the batch strategy, with a size per successive batch.
struct VariableBatchJobUpdateStrategy {
  1: list<i32> groupSizes
  2: bool autopauseAfterBatch
}

union JobUpdateStrategy {
  1: QueueJobUpdateStrategy queueStrategy
  2: BatchJobUpdateStrategy batchStrategy
  3: VariableBatchJobUpdateStrategy varBatchStrategy
}

// Pacing, failure limits and scope of an update.
struct JobUpdateSettings {
   1: i32 updateGroupSize
   2: i32 maxPerInstanceFailures
   3: i32 maxFailedInstances
   5: i32 minWaitInInstanceRunningMs
   6: bool rollbackOnFailure
   7: set<Range> updateOnlyTheseInstances
   8: bool waitForBatchCompletion
   9: optional i32 blockIfNoPulsesAfterMs
  10: optional bool slaAware
  11: optional JobUpdateStrategy updateStrategy
}

// One state transition of an update.
struct JobUpdateEvent {
  1: JobUpdateStatus status
  2: i64 timestampMs
  3: optional string user
  4: optional string message
}

// One action taken on one instance during an update.
struct JobInstanceUpdateEvent {
  1: i32 instanceId
  2: i64 timestampMs
  3: JobUpdateAction action
  4: optional string message
}

// A task configuration and the instances it applies to.
struct InstanceTaskConfig {
  1: TaskConfig task
  2: set<Range> instances
}

struct JobUpdateState {
  1: JobUpdateStatus status
  2: i64 createdTimestampMs
  3: i64 lastModifiedTimestampMs
}

struct JobUpdateSummary {
  5: JobUpdateKey key
  3: string user
  4: JobUpdateState state
  6: optional set<Metadata> metadata
}

// From-state, to-state and settings of an update.
struct JobUpdateInstructions {
  1: set<InstanceTaskConfig> initialState
  2: InstanceTaskConfig desiredState
  3: JobUpdateSettings settings
}

struct JobUpdate {
  1: JobUpdateSummary summary
  2: JobUpdateInstructions instructions
}

// An update together with its job-level and instance-level history.
struct JobUpdateDetails {
  1: JobUpdate update
  2: list<JobUpdateEvent> updateEvents
  3: list<JobInstanceUpdateEvent> instanceEvents
}

// Argument of startJobUpdate and getJobUpdateDiff.
struct JobUpdateRequest {
  1: TaskConfig taskConfig
  2: i32 instanceCount
  3: JobUpdateSettings settings
  4: optional set<Metadata> metadata
}

// Update filter; all set terms must match.
struct JobUpdateQuery {
  2: string role
  8: JobUpdateKey key
  3: JobKey jobKey
  4: string user
  5: set<JobUpdateStatus> updateStatuses
  6: i32 offset
  7: i32 limit
}

// A pending SLA-aware drain of one host.
struct HostMaintenanceRequest {
  1: string host
  2: SlaPolicy defaultSlaPolicy
  3: i64 timeoutSecs
  4: i64 createdTimestampMs
}

// ---------------------------------------------------------------------------
// Call results
// ---------------------------------------------------------------------------

struct ListBackupsResult {
  1: set<string> backups
}

struct StartMaintenanceResult {
  1: set<HostStatus> statuses
}

struct DrainHostsResult {
  1: set<HostStatus> statuses
}

struct QueryRecoveryResult {
  1: set<ScheduledTask> tasks
}

struct MaintenanceStatusResult {
  1: set<HostStatus> statuses
}

struct EndMaintenanceResult {
  1: set<HostStatus> statuses
}

struct RoleSummaryResult {
  1: set<RoleSummary> summaries
}

struct JobSummaryResult {
  1: set<JobSummary> summaries
}

struct ConfigSummaryResult {
  1: ConfigSummary summary
}

struct GetPendingReasonResult {
  1: set<PendingReason> reasons
}

struct StartJobUpdateResult {
  1: JobUpdateKey key
  2: optional JobUpdateSummary updateSummary
}

struct GetJobUpdateSummariesResult {
  1: list<JobUpdateSummary> updateSummaries
}

// `details` is the older single-update form of `detailsList`.
struct GetJobUpdateDetailsResult {
  1: JobUpdateDetails details
  2: list<JobUpdateDetails> detailsList
}

struct PulseJobUpdateResult {
  1: JobUpdatePulseStatus status
}

// Instances an update would add, remove, change or leave alone.
struct GetJobUpdateDiffResult {
  1: set<ConfigGroup> add
  2: set<ConfigGroup> remove
  3: set<ConfigGroup> update
  4: set<ConfigGroup> unchanged
}

// A named tier and its settings.
struct TierConfig {
  1: string name
  2: map<string, string> settings
}

struct GetTierConfigResult {
  1: string defaultTierName
  2: set<TierConfig> tiers
}

// Scheduler identity returned with every response.
struct ServerInfo {
  1: string clusterName
  3: string statsUrlPrefix
}

// Payload of a successful call; the member set depends on the method.
union Result {
   1: PopulateJobResult populateJobResult
   3: ScheduleStatusResult scheduleStatusResult
   4: GetJobsResult getJobsResult
   5: GetQuotaResult getQuotaResult
   6: ListBackupsResult listBackupsResult
   7: StartMaintenanceResult startMaintenanceResult
   8: DrainHostsResult drainHostsResult
   9: QueryRecoveryResult queryRecoveryResult
  10: MaintenanceStatusResult maintenanceStatusResult
  11: EndMaintenanceResult endMaintenanceResult
  17: RoleSummaryResult roleSummaryResult
  18: JobSummaryResult jobSummaryResult
  20: ConfigSummaryResult configSummaryResult
  21: GetPendingReasonResult getPendingReasonResult
  22: StartJobUpdateResult startJobUpdateResult
  23: GetJobUpdateSummariesResult getJobUpdateSummariesResult
  24: GetJobUpdateDetailsResult getJobUpdateDetailsResult
  25: PulseJobUpdateResult pulseJobUpdateResult
  26: GetJobUpdateDiffResult getJobUpdateDiffResult
  27: GetTierConfigResult getTierConfigResult
}

struct ResponseDetail {
  1: string message
}

// Envelope returned by every method.
struct Response {
  1: ResponseCode responseCode
  5: ServerInfo serverInfo
  3: optional Result result
  6: list<ResponseDetail> details
}

// ---------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------

// Queries that never change scheduler state.
service ReadOnlyScheduler {
  Response getRoleSummary()
  Response getJobSummary(1: string role)
  Response getTasksStatus(1: TaskQuery query)
  // Like getTasksStatus, but with executor configuration left out.
  Response getTasksWithoutConfigs(1: TaskQuery query)
  Response getPendingReason(1: TaskQuery query)
  Response getConfigSummary(1: JobKey job)
  Response getJobs(1: string ownerRole)
  Response getQuota(1: string ownerRole)
  // Fills in server-side defaults of a job without launching it.
  Response populateJobConfig(1: JobConfiguration description)
  Response getJobUpdateSummaries(1: JobUpdateQuery jobUpdateQuery)
  // `key` is the older form of `query`.
  Response getJobUpdateDetails(1: JobUpdateKey key, 2: JobUpdateQuery query)
  Response getJobUpdateDiff(1: JobUpdateRequest request)
  Response getTierConfigs()
}

// Job lifecycle operations for job owners.
service AuroraSchedulerManager extends ReadOnlyScheduler {
  Response createJob(1: JobConfiguration description)
  Response scheduleCronJob(1: JobConfiguration description)
  Response descheduleCronJob(4: JobKey job)
  Response startCronJob(4: JobKey job)
  Response restartShards(5: JobKey job, 3: set<i32> shardIds)
  Response killTasks(4: JobKey job, 5: set<i32> instances, 6: string message)
  // Adds `count` instances copying the configuration of `key`.
  Response addInstances(3: InstanceKey key, 4: i32 count)
  Response replaceCronTemplate(1: JobConfiguration config)
  Response startJobUpdate(1: JobUpdateRequest request, 3: string message)
  Response pauseJobUpdate(1: JobUpdateKey key, 3: string message)
  Response resumeJobUpdate(1: JobUpdateKey key, 3: string message)
  Response abortJobUpdate(1: JobUpdateKey key, 3: string message)
  Response rollbackJobUpdate(1: JobUpdateKey key, 2: string message)
  // Heartbeat for updates that set blockIfNoPulsesAfterMs.
  Response pulseJobUpdate(1: JobUpdateKey key)
}

struct ExplicitReconciliationSettings {
  1: optional i32 batchSize
}

// Operator-only calls: quota, storage, maintenance and reconciliation.
service AuroraAdmin extends AuroraSchedulerManager {
  Response setQuota(1: string ownerRole, 2: ResourceAggregate quota)
  Response forceTaskState(1: string taskId, 2: ScheduleStatus status)
  Response performBackup()
  Response listBackups()
  Response stageRecovery(1: string backupId)
  Response queryRecovery(1: TaskQuery query)
  Response deleteRecoveryTasks(1: TaskQuery query)
  Response commitRecovery()
  Response unloadRecovery()
  Response startMaintenance(1: Hosts hosts)
  Response drainHosts(1: Hosts hosts)
  Response maintenanceStatus(1: Hosts hosts)
  Response endMaintenance(1: Hosts hosts)
  Response slaDrainHosts(1: Hosts hosts, 2: SlaPolicy defaultSlaPolicy, 3: i64 timeoutSecs)
  Response snapshot()
  Response triggerExplicitTaskReconciliation(1: ExplicitReconciliationSettings settings)
  Response triggerImplicitTaskReconciliation()
  Response pruneTasks(1: TaskQuery query)
}

// HTTP header that makes a non-leading scheduler answer instead of redirecting.
const string BYPASS_LEADER_REDIRECT_HEADER_NAME = "Bypass-Leader-Redirect"

// Sandbox-relative mount point of the task filesystem when an image is used.
const string TASK_FILESYSTEM_MOUNT_POINT = "taskfs"
