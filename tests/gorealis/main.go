// Command realis-driver drives an Aurora scheduler (here: Peloton's Aurora bridge) with
// gorealis, PayPal's Go client for Aurora, the way an Aurora user's Go tooling would.
//
// Usage:
//
//	realis-driver -url http://127.0.0.1:5396/api -transport json|binary [-name N] [-host H] SCENARIO
//
// Each scenario runs one Aurora workflow end to end through gorealis's own calls and
// monitors (no hand-built Thrift), checks what an Aurora user would check, and prints one
// JSON object of observations on stdout.  A failed check or call prints "FAIL: ..." on
// stderr and exits 1, so the Python tests that start this program (tests/e2e/test_gorealis.py)
// see a failure with its reason.  The scenarios are listed in `scenarios` below.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	realis "github.com/paypal/gorealis"
	"github.com/paypal/gorealis/gen-go/apache/aurora"
)

type driver struct {
	client    realis.Realis
	raw       *aurora.AuroraSchedulerManagerClient
	monitor   *realis.Monitor
	role, env string
	name      string
	host      string
	timeout   time.Duration
	out       map[string]interface{}
}

// failure aborts a scenario with a message (recovered in main).
type failure struct{ msg string }

func (d *driver) fail(format string, args ...interface{}) {
	panic(failure{fmt.Sprintf(format, args...)})
}

func (d *driver) must(err error, what string) {
	if err != nil {
		d.fail("%s: %v", what, err)
	}
}

func (d *driver) key() *aurora.JobKey {
	return &aurora.JobKey{Role: d.role, Environment: d.env, Name: d.name}
}

// thermos is executor data in the Thermos JSON form: one process running `cmd`.
func thermos(name, cmd string) string {
	doc := map[string]interface{}{
		"name": name,
		"task": map[string]interface{}{
			"name":      name,
			"processes": []map[string]interface{}{{"name": "main", "cmdline": cmd, "final": false}},
		},
	}
	data, _ := json.Marshal(doc)
	return string(data)
}

// job is a small service (or batch) job of this scenario's key running `cmd`.
func (d *driver) job(cmd string, instances int32, service bool) realis.Job {
	return realis.NewJob().
		Environment(d.env).Role(d.role).Name(d.name).
		ExecutorName("AuroraExecutor").ExecutorData(thermos(d.name, cmd)).
		CPU(0.1).RAM(32).Disk(16).
		IsService(service).InstanceCount(instances).MaxFailure(1).Tier("preemptible")
}

func (d *driver) settings(groupSize int32) *aurora.JobUpdateSettings {
	s := realis.NewUpdateSettings()
	s.UpdateGroupSize = groupSize
	s.MinWaitInInstanceRunningMs = 100
	return s
}

func (d *driver) seconds() int { return int(d.timeout / time.Second) }

// running waits until `count` instances of the job are RUNNING (gorealis's ScheduleStatus monitor).
func (d *driver) running(count int32) {
	ok, err := d.monitor.ScheduleStatus(d.key(), count,
		map[aurora.ScheduleStatus]bool{aurora.ScheduleStatus_RUNNING: true}, 1, d.seconds())
	if !ok || err != nil {
		ids, _ := d.client.GetInstanceIds(d.key(), []aurora.ScheduleStatus{aurora.ScheduleStatus_RUNNING})
		d.fail("waiting for %d RUNNING instances of %s (have %v): %v", count, d.name, ids, err)
	}
}

// gone waits until no instance of the job is active.
func (d *driver) gone() {
	deadline := time.Now().Add(d.timeout)
	for time.Now().Before(deadline) {
		ids, err := d.client.GetInstanceIds(d.key(), activeStates())
		d.must(err, "GetInstanceIds")
		if len(ids) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Say which runs stay active and what happened to them: a red test names its cause.
	tasks, _ := d.client.GetTasksWithoutConfigs(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()},
		Statuses: activeStates()})
	var seen []string
	for _, t := range tasks {
		var events []string
		for _, e := range t.GetTaskEvents() {
			events = append(events, fmt.Sprintf("%v@%d", e.GetStatus(), e.GetTimestamp()))
		}
		seen = append(seen, fmt.Sprintf("%s %v %v", t.GetAssignedTask().GetTaskId(), t.GetStatus(), events))
	}
	d.fail("instances of %s still active after %v: %v", d.name, d.timeout, seen)
}

func activeStates() []aurora.ScheduleStatus {
	var out []aurora.ScheduleStatus
	for s := range realis.ActiveStates {
		out = append(out, s)
	}
	return out
}

// rolledForward waits for the update with gorealis's JobUpdate monitor. Guarded because
// gorealis reads the summaries before checking the monitor's error (a timeout would panic).
func (d *driver) rolledForward(key *aurora.JobUpdateKey) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("monitor failed: %v", r)
		}
	}()
	return d.monitor.JobUpdate(*key, 1, d.seconds())
}

func (d *driver) updateDetails(key *aurora.JobUpdateKey) *aurora.JobUpdateDetails {
	resp, err := d.client.JobUpdateDetails(aurora.JobUpdateQuery{Key: key})
	d.must(err, "JobUpdateDetails")
	list := resp.GetResult_().GetGetJobUpdateDetailsResult_().GetDetailsList()
	if len(list) != 1 {
		d.fail("JobUpdateDetails of %s: want 1 update, got %d", key.GetID(), len(list))
	}
	return list[0]
}

func (d *driver) taskIds(statuses ...aurora.ScheduleStatus) map[int32]string {
	tasks, err := d.client.GetTaskStatus(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()}, Statuses: statuses})
	d.must(err, "GetTaskStatus")
	out := map[int32]string{}
	for _, t := range tasks {
		out[t.GetAssignedTask().GetInstanceId()] = t.GetAssignedTask().GetTaskId()
	}
	return out
}

func (d *driver) listedJob() *aurora.JobConfiguration {
	_, result, err := d.client.GetJobs(d.role)
	d.must(err, "GetJobs")
	for _, cfg := range result.GetConfigs() {
		if cfg.GetKey().GetName() == d.name && cfg.GetKey().GetEnvironment() == d.env {
			return cfg
		}
	}
	return nil
}

func strategyName(s *aurora.JobUpdateStrategy) string {
	switch {
	case s == nil:
		return "none"
	case s.IsSetQueueStrategy():
		return "queue"
	case s.IsSetBatchStrategy():
		return "batch"
	case s.IsSetVarBatchStrategy():
		return "varbatch"
	}
	return "empty"
}

// service: create by update (CreateService + monitor), status, update with a batch strategy
// (monitored), a no-op redeploy, restart, add instances, kill.
func (d *driver) service() {
	_, result, err := d.client.CreateService(d.job("sleep 1000", 2, true), d.settings(2))
	d.must(err, "CreateService")
	if result == nil || result.GetKey() == nil {
		d.fail("CreateService returned no update key")
	}
	ok, err := d.rolledForward(result.GetKey())
	if !ok {
		d.fail("creating update did not roll forward: %v", err)
	}
	d.running(2)
	d.out["created"] = result.GetKey().GetID()

	summary := d.call("GetJobSummary", func(ctx context.Context) (*aurora.Response, error) {
		return d.raw.GetJobSummary(ctx, d.role)
	})
	for _, s := range summary.GetResult_().GetJobSummaryResult_().GetSummaries() {
		if s.GetJob().GetKey().GetName() == d.name {
			d.out["summary_instances"] = s.GetJob().GetInstanceCount()
		}
	}
	if cfg := d.listedJob(); cfg == nil {
		d.fail("GetJobs does not list %s", d.name)
	}

	// An update to a new command with a batch strategy, watched by gorealis's monitor.
	before := d.taskIds(aurora.ScheduleStatus_RUNNING)
	update := realis.NewUpdateJob(d.job("sleep 1001", 2, true).TaskConfig(), d.settings(1))
	update.InstanceCount(2)
	update.BatchUpdateStrategy(aurora.BatchJobUpdateStrategy{GroupSize: 1})
	resp, err := d.client.StartJobUpdate(update, "new command")
	d.must(err, "StartJobUpdate")
	key := resp.GetResult_().GetStartJobUpdateResult_().GetKey()
	ok, err = d.rolledForward(key)
	if !ok {
		d.fail("update did not roll forward: %v", err)
	}
	d.running(2)
	after := d.taskIds(aurora.ScheduleStatus_RUNNING)
	for i, id := range after {
		if before[i] == id {
			d.fail("instance %d still runs its old task %s after the update", i, id)
		}
	}
	details := d.updateDetails(key)
	settings := details.GetUpdate().GetInstructions().GetSettings()
	d.out["update_strategy"] = strategyName(settings.GetUpdateStrategy())
	d.out["update_group_size"] = settings.GetUpdateStrategy().GetBatchStrategy().GetGroupSize()
	d.out["update_status"] = details.GetUpdate().GetSummary().GetState().GetStatus().String()

	// The same config again: Aurora calls this a no-op; the client must get a readable result.
	noop := realis.NewUpdateJob(d.job("sleep 1001", 2, true).TaskConfig(), d.settings(1))
	noop.InstanceCount(2)
	resp, err = d.client.StartJobUpdate(noop, "no change")
	d.must(err, "no-op StartJobUpdate")
	noopKey := resp.GetResult_().GetStartJobUpdateResult_().GetKey()
	d.out["noop_key"] = noopKey.GetID()
	d.out["noop_message"] = detailMessages(resp)
	if ok, err = d.rolledForward(noopKey); !ok {
		d.fail("the no-op update's key does not read as ROLLED_FORWARD: %v", err)
	}
	if now := d.taskIds(aurora.ScheduleStatus_RUNNING); fmt.Sprint(now) != fmt.Sprint(after) {
		d.fail("the no-op update replaced tasks: %v -> %v", after, now)
	}

	// Restart instance 1: a new run replaces the old one.
	old := d.taskIds(aurora.ScheduleStatus_RUNNING)[1]
	_, err = d.client.RestartInstances(d.key(), 1)
	d.must(err, "RestartInstances")
	d.eventually("instance 1 restarted", func() bool {
		id, found := d.taskIds(aurora.ScheduleStatus_RUNNING)[1]
		return found && id != old
	})

	// Add one instance copied from instance 0.
	_, err = d.client.AddInstances(aurora.InstanceKey{JobKey: d.key(), InstanceId: 0}, 1)
	d.must(err, "AddInstances")
	d.running(3)
	d.out["instances_after_add"] = len(d.taskIds(aurora.ScheduleStatus_RUNNING))

	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
	if cfg := d.listedJob(); cfg != nil {
		d.fail("GetJobs still lists the killed job %s", d.name)
	}
}

// call makes one call that gorealis has no method for (replaceCronTemplate, getJobSummary)
// with gorealis's generated Thrift client over the same transport and protocol; the
// answer must be OK.
func (d *driver) call(what string, fn func(context.Context) (*aurora.Response, error)) *aurora.Response {
	resp, err := fn(context.TODO())
	d.must(err, what)
	if resp.GetResponseCode() != aurora.ResponseCode_OK {
		d.fail("%s: %v %s", what, resp.GetResponseCode(), detailMessages(resp))
	}
	return resp
}

// rawClient is gorealis's generated AuroraSchedulerManager client on a transport set up as
// gorealis sets up its own (same headers per protocol).
func rawClient(url, transport string) (*aurora.AuroraSchedulerManagerClient, error) {
	trans, err := thrift.NewTHttpClientWithOptions(url, thrift.THttpClientOptions{})
	if err != nil {
		return nil, err
	}
	http := trans.(*thrift.THttpClient)
	var protocol thrift.TProtocolFactory
	if transport == "binary" {
		http.DelHeader("Content-Type")
		http.SetHeader("Accept", "application/vnd.apache.thrift.binary")
		http.SetHeader("Content-Type", "application/vnd.apache.thrift.binary")
		protocol = thrift.NewTBinaryProtocolFactoryDefault()
	} else {
		http.SetHeader("Content-Type", "application/x-thrift")
		protocol = thrift.NewTJSONProtocolFactory()
	}
	return aurora.NewAuroraSchedulerManagerClientFactory(trans, protocol), nil
}

func detailMessages(resp *aurora.Response) string {
	var msgs []string
	for _, detail := range resp.GetDetails() {
		msgs = append(msgs, detail.GetMessage())
	}
	return strings.Join(msgs, "; ")
}

func (d *driver) eventually(what string, cond func() bool) {
	deadline := time.Now().Add(d.timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	d.fail("timed out waiting for %s", what)
}

// createjob: createJob (not an update), status via task queries, kill some then all.
func (d *driver) createJob() {
	_, err := d.client.CreateJob(d.job("sleep 1000", 2, true))
	d.must(err, "CreateJob")
	d.running(2)
	tasks, err := d.client.GetTasksWithoutConfigs(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()}})
	d.must(err, "GetTasksWithoutConfigs")
	d.out["tasks"] = len(tasks)
	if _, err = d.client.CreateJob(d.job("sleep 1000", 2, true)); err == nil {
		d.fail("a second CreateJob of %s was accepted", d.name)
	}
	_, err = d.client.KillInstances(d.key(), 0)
	d.must(err, "KillInstances")
	d.eventually("instance 0 killed", func() bool {
		_, running := d.taskIds(aurora.ScheduleStatus_RUNNING)[0]
		return !running
	})
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
}

// redeploy: killall, then the same key deployed again behaves as a new job (part B item 1).
func (d *driver) redeploy() {
	_, result, err := d.client.CreateService(d.job("sleep 1000", 1, true), d.settings(1))
	d.must(err, "CreateService")
	if ok, err := d.rolledForward(result.GetKey()); !ok {
		d.fail("first deployment: %v", err)
	}
	d.running(1)
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
	_, result, err = d.client.CreateService(d.job("sleep 1002", 2, true), d.settings(1))
	d.must(err, "CreateService of the killed key")
	if ok, err := d.rolledForward(result.GetKey()); !ok {
		d.fail("redeployment: %v", err)
	}
	d.running(2)
	_, err = d.client.RestartInstances(d.key(), 0, 1)
	d.must(err, "RestartInstances after redeploy")
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob after redeploy")
	d.gone()
}

// varbatch: a VarBatch update with autopauseAfterBatch pauses itself after each batch but the
// last (Aurora's JobUpdateControllerImpl.maybeAutoPause), as gorealis's own end-to-end test
// drives it: five instances in groups of 1, 2 and (the last size repeating) 2.
func (d *driver) varBatch() {
	_, result, err := d.client.CreateService(d.job("sleep 1000", 5, true), d.settings(5))
	d.must(err, "CreateService")
	if ok, err := d.rolledForward(result.GetKey()); !ok {
		d.fail("first deployment: %v", err)
	}
	update := realis.NewUpdateJob(d.job("sleep 1003", 5, true).TaskConfig(), d.settings(1))
	update.InstanceCount(5)
	update.VariableBatchStrategy(aurora.VariableBatchJobUpdateStrategy{
		GroupSizes: []int32{1, 2}, AutopauseAfterBatch: true})
	resp, err := d.client.StartJobUpdate(update, "in batches")
	d.must(err, "StartJobUpdate")
	key := resp.GetResult_().GetStartJobUpdateResult_().GetKey()
	var batches []int
	for i := 0; i < 3; i++ {
		batch, err := d.monitor.AutoPausedUpdateMonitor(*key, time.Second, d.timeout)
		d.must(err, "AutoPausedUpdateMonitor")
		batches = append(batches, batch)
		status := d.updateDetails(key).GetUpdate().GetSummary().GetState().GetStatus()
		if i < 2 {
			if status != aurora.JobUpdateStatus_ROLL_FORWARD_PAUSED {
				d.fail("after batch %d the update is %v, not ROLL_FORWARD_PAUSED", batch, status)
			}
			_, err = d.client.ResumeJobUpdate(key, "next batch")
			d.must(err, "ResumeJobUpdate")
		} else if status != aurora.JobUpdateStatus_ROLLED_FORWARD {
			d.fail("after its last batch the update is %v, not ROLLED_FORWARD", status)
		}
	}
	d.out["batches"] = batches
	d.running(5)
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
}

// watchtime: an update to a command that dies inside the watch time rolls back (part B item 2).
func (d *driver) watchTime() {
	_, result, err := d.client.CreateService(d.job("sleep 1000", 1, true), d.settings(1))
	d.must(err, "CreateService")
	if ok, err := d.rolledForward(result.GetKey()); !ok {
		d.fail("first deployment: %v", err)
	}
	update := realis.NewUpdateJob(d.job("sleep 2; exit 1", 1, true).TaskConfig(), d.settings(1))
	update.InstanceCount(1).WatchTime(5000).RollbackOnFail(true).MaxPerInstanceFailures(0)
	resp, err := d.client.StartJobUpdate(update, "a bad command")
	d.must(err, "StartJobUpdate")
	key := resp.GetResult_().GetStartJobUpdateResult_().GetKey()
	ok, err := d.rolledForward(key)
	status := d.updateDetails(key).GetUpdate().GetSummary().GetState().GetStatus()
	d.out["status"] = status.String()
	if ok || status != aurora.JobUpdateStatus_ROLLED_BACK {
		d.fail("an update whose tasks die inside the watch time ended %v (monitor: %v %v), "+
			"not ROLLED_BACK", status, ok, err)
	}
	watch := d.updateDetails(key).GetUpdate().GetInstructions().GetSettings().GetMinWaitInInstanceRunningMs()
	if watch != 5000 {
		d.fail("minWaitInInstanceRunningMs reads back as %d", watch)
	}
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
}

// watchupdate: create a service by update, update it to a new command one instance at a time
// with a watch time that its runs outlive (the update rolls forward, and takes at least one
// watch time per group), then kill it.  The observations carry the task ids before and after
// and the update's duration, so a caller that watches the hosts (tests/k8s) can match them.
func (d *driver) watchUpdate() {
	const instances, watchMs = 2, 4000
	_, result, err := d.client.CreateService(d.job("sleep 1000", instances, true), d.settings(instances))
	d.must(err, "CreateService")
	if ok, err := d.rolledForward(result.GetKey()); !ok {
		d.fail("creating update did not roll forward: %v", err)
	}
	d.running(instances)
	before := d.taskIds(aurora.ScheduleStatus_RUNNING)

	update := realis.NewUpdateJob(d.job("sleep 1004", instances, true).TaskConfig(), d.settings(1))
	update.InstanceCount(instances).WatchTime(watchMs).RollbackOnFail(true)
	update.BatchUpdateStrategy(aurora.BatchJobUpdateStrategy{GroupSize: 1})
	began := time.Now()
	resp, err := d.client.StartJobUpdate(update, "new command, watched")
	d.must(err, "StartJobUpdate")
	key := resp.GetResult_().GetStartJobUpdateResult_().GetKey()
	ok, err := d.rolledForward(key)
	took := time.Since(began)
	details := d.updateDetails(key)
	status := details.GetUpdate().GetSummary().GetState().GetStatus()
	if !ok || status != aurora.JobUpdateStatus_ROLLED_FORWARD {
		d.fail("the watched update ended %v (monitor: %v %v), not ROLLED_FORWARD", status, ok, err)
	}
	// One group after the other, each instance's new run RUNNING for the watch time.
	if took < instances*watchMs*time.Millisecond {
		d.fail("the watched update of %d instances in groups of 1 took %v, under %d x %d ms",
			instances, took, instances, watchMs)
	}
	d.running(instances)
	after := d.taskIds(aurora.ScheduleStatus_RUNNING)
	for i, id := range after {
		if before[i] == id {
			d.fail("instance %d still runs its old task %s after the update", i, id)
		}
	}
	d.out["update_status"] = status.String()
	d.out["watch_ms"] = details.GetUpdate().GetInstructions().GetSettings().GetMinWaitInInstanceRunningMs()
	d.out["update_ms"] = took.Milliseconds()
	d.out["before"] = before
	d.out["after"] = after

	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
	if cfg := d.listedJob(); cfg != nil {
		d.fail("GetJobs still lists the killed job %s", d.name)
	}
}

// cron: schedule, listed with its schedule, start now (tasks run), replace the template,
// deschedule (no longer listed as cron), bad schedules refused.
func (d *driver) cron() {
	bad := d.job("echo bad", 1, false).CronSchedule("61 * * * *")
	if _, err := d.client.ScheduleCronJob(bad); err == nil {
		d.fail("an invalid cron schedule was accepted")
	}
	job := d.job("sleep 1000", 2, false).CronSchedule("*/30 * * * *").
		CronCollisionPolicy(aurora.CronCollisionPolicy_KILL_EXISTING)
	_, err := d.client.ScheduleCronJob(job)
	d.must(err, "ScheduleCronJob")
	cfg := d.listedJob()
	if cfg == nil {
		d.fail("GetJobs does not list the cron job %s", d.name)
	}
	d.out["schedule"] = cfg.GetCronSchedule()
	d.out["policy"] = cfg.GetCronCollisionPolicy().String()
	summary := d.call("GetJobSummary", func(ctx context.Context) (*aurora.Response, error) {
		return d.raw.GetJobSummary(ctx, d.role)
	})
	for _, s := range summary.GetResult_().GetJobSummaryResult_().GetSummaries() {
		if s.GetJob().GetKey().GetName() == d.name {
			d.out["next_run_ms"] = s.GetNextCronRunMs()
		}
	}
	_, err = d.client.StartCronJob(d.key())
	d.must(err, "StartCronJob")
	d.running(2)
	first := d.taskIds(aurora.ScheduleStatus_RUNNING)

	// KILL_EXISTING: starting it again kills the running instances and starts new ones.
	_, err = d.client.StartCronJob(d.key())
	d.must(err, "StartCronJob again")
	d.eventually("a second run replacing the first", func() bool {
		now := d.taskIds(aurora.ScheduleStatus_RUNNING)
		if len(now) != 2 {
			return false
		}
		for i, id := range now {
			if first[i] == id {
				return false
			}
		}
		return true
	})

	replaced := d.job("sleep 1000", 1, false).CronSchedule("0 4 * * *").
		CronCollisionPolicy(aurora.CronCollisionPolicy_CANCEL_NEW)
	d.call("ReplaceCronTemplate", func(ctx context.Context) (*aurora.Response, error) {
		return d.raw.ReplaceCronTemplate(ctx, replaced.JobConfig())
	})
	cfg = d.listedJob()
	if cfg == nil || cfg.GetCronSchedule() != "0 4 * * *" ||
		cfg.GetCronCollisionPolicy() != aurora.CronCollisionPolicy_CANCEL_NEW {
		d.fail("GetJobs after replaceCronTemplate: %v", cfg)
	}
	// CANCEL_NEW: a start while the run is active changes nothing.
	before := d.taskIds(aurora.ScheduleStatus_RUNNING)
	_, err = d.client.StartCronJob(d.key())
	d.must(err, "StartCronJob with CANCEL_NEW")
	time.Sleep(3 * time.Second) // nothing may happen: give a wrong kill time to show
	if now := d.taskIds(aurora.ScheduleStatus_RUNNING); fmt.Sprint(now) != fmt.Sprint(before) {
		d.fail("CANCEL_NEW replaced the running run: %v -> %v", before, now)
	}

	_, err = d.client.DescheduleCronJob(d.key())
	d.must(err, "DescheduleCronJob")
	if _, err = d.client.StartCronJob(d.key()); err == nil {
		d.fail("StartCronJob of a descheduled job was accepted")
	}
	if cfg = d.listedJob(); cfg != nil && cfg.GetCronSchedule() != "" {
		d.fail("GetJobs still lists %s with a cron schedule after deschedule", d.name)
	}
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
}

// maintenance: start maintenance on a host, drain it (gorealis's host monitor), end it.
func (d *driver) maintenance() {
	if d.host == "" {
		d.fail("-host is required")
	}
	_, result, err := d.client.StartMaintenance(d.host)
	d.must(err, "StartMaintenance")
	d.out["started"] = modes(result.GetStatuses())
	_, drained, err := d.client.DrainHosts(d.host)
	d.must(err, "DrainHosts")
	d.out["draining"] = modes(drained.GetStatuses())
	done, err := d.monitor.HostMaintenance([]string{d.host},
		[]aurora.MaintenanceMode{aurora.MaintenanceMode_DRAINED}, 1, d.seconds())
	if err != nil || !done[d.host] {
		d.fail("host %s not DRAINED: %v", d.host, err)
	}
	_, status, err := d.client.MaintenanceStatus(d.host)
	d.must(err, "MaintenanceStatus")
	d.out["status"] = modes(status.GetStatuses())
	_, ended, err := d.client.EndMaintenance(d.host)
	d.must(err, "EndMaintenance")
	d.out["ended"] = modes(ended.GetStatuses())
}

func modes(statuses []*aurora.HostStatus) map[string]string {
	out := map[string]string{}
	for _, s := range statuses {
		out[s.GetHost()] = s.GetMode().String()
	}
	return out
}

// sladrain: drain hosts only as far as the jobs' SLA allows (issue 11 item 6), with a
// production (preferred tier) service of 20 instances: by default Aurora checks the SLA of
// production tasks of jobs with at least 20 active instances only.
//  1. A count policy nothing can meet (19 of the 20 RUNNING for an hour) holds the busiest
//     host's tasks where they are; once the drain's timeout (8 s) has passed they go anyway.
//  2. A percentage policy the other instances meet (50 %, no duration) lets the next host
//     drain at once, long before its one-hour timeout.
func (d *driver) slaDrain() {
	_, err := d.client.CreateJob(d.job("sleep 1000", 20, true).Tier("preferred").CPU(0.05))
	d.must(err, "CreateJob")
	d.running(20)

	first, onFirst := d.busiestHost("")
	d.out["on_first"] = onFirst
	count := &aurora.SlaPolicy{CountSlaPolicy: &aurora.CountSlaPolicy{Count: 19, DurationSecs: 3600}}
	start := time.Now()
	result, err := d.client.SLADrainHosts(count, 8, first)
	d.must(err, "SLADrainHosts")
	d.out["draining"] = modes(result.GetStatuses())
	// For 3 s (well inside the timeout) every task stays RUNNING on the draining host.
	held := onFirst
	for time.Since(start) < 3*time.Second {
		if n := d.runningOn(first); n < held {
			held = n
		}
		time.Sleep(250 * time.Millisecond)
	}
	d.out["held"] = held
	d.drained(first)
	d.out["forced_after_s"] = time.Since(start).Seconds()
	_, _, err = d.client.EndMaintenance(first)
	d.must(err, "EndMaintenance")

	d.running(20)
	second, onSecond := d.busiestHost(first)
	d.out["on_second"] = onSecond
	percentage := &aurora.SlaPolicy{PercentageSlaPolicy: &aurora.PercentageSlaPolicy{Percentage: 50}}
	start = time.Now()
	_, err = d.client.SLADrainHosts(percentage, 3600, second)
	d.must(err, "SLADrainHosts")
	d.drained(second)
	d.out["sla_drained_s"] = time.Since(start).Seconds()
	_, _, err = d.client.EndMaintenance(second)
	d.must(err, "EndMaintenance")
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
}

// runningOn counts the job's RUNNING tasks on `host`.
func (d *driver) runningOn(host string) int {
	tasks, err := d.client.GetTaskStatus(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()},
		Statuses: []aurora.ScheduleStatus{aurora.ScheduleStatus_RUNNING}})
	d.must(err, "GetTaskStatus")
	n := 0
	for _, t := range tasks {
		if t.GetAssignedTask().GetSlaveHost() == host {
			n++
		}
	}
	return n
}

// busiestHost is the host (other than `not`) with the most RUNNING tasks of the job.
func (d *driver) busiestHost(not string) (string, int) {
	tasks, err := d.client.GetTaskStatus(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()},
		Statuses: []aurora.ScheduleStatus{aurora.ScheduleStatus_RUNNING}})
	d.must(err, "GetTaskStatus")
	counts := map[string]int{}
	for _, t := range tasks {
		counts[t.GetAssignedTask().GetSlaveHost()]++
	}
	best, most := "", 0
	for host, n := range counts {
		if host != not && (n > most || n == most && host < best) {
			best, most = host, n
		}
	}
	if best == "" {
		d.fail("no host other than %q runs tasks of %s", not, d.name)
	}
	return best, most
}

// drained waits for `host` to be DRAINED (gorealis's host maintenance monitor).
func (d *driver) drained(host string) {
	done, err := d.monitor.HostMaintenance([]string{host},
		[]aurora.MaintenanceMode{aurora.MaintenanceMode_DRAINED}, 1, d.seconds())
	if err != nil || !done[host] {
		d.fail("host %s not DRAINED: %v", host, err)
	}
}

// quota: set a role's quota and read it back.
func (d *driver) quota() {
	cpu, ram, disk := 12.0, int64(8192), int64(20480)
	_, err := d.client.SetQuota(d.role, &cpu, &ram, &disk)
	d.must(err, "SetQuota")
	resp, err := d.client.GetQuota(d.role)
	d.must(err, "GetQuota")
	quota := resp.GetResult_().GetGetQuotaResult_().GetQuota()
	got := map[string]float64{}
	for _, r := range quota.GetResources() {
		switch {
		case r.IsSetNumCpus():
			got["cpu"] = r.GetNumCpus()
		case r.IsSetRamMb():
			got["ram"] = float64(r.GetRamMb())
		case r.IsSetDiskMb():
			got["disk"] = float64(r.GetDiskMb())
		}
	}
	d.out["quota"] = got
}

// pending: as on Aurora, a job too big for any host is accepted and its task stays PENDING with
// a reason naming what it lacks (hosts may join later, the quota may grow).
func (d *driver) pending() {
	_, err := d.client.CreateJob(d.job("sleep 1000", 1, true).CPU(64))
	d.must(err, "CreateJob of a job no host can hold")
	var reasons []*aurora.PendingReason
	d.eventually("a pending reason", func() bool {
		reasons, err = d.client.GetPendingReason(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()}})
		d.must(err, "GetPendingReason")
		return len(reasons) == 1 && reasons[0].GetReason() != ""
	})
	d.out["reason"] = reasons[0].GetReason()
	tasks, err := d.client.GetTasksWithoutConfigs(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()}})
	d.must(err, "GetTasksWithoutConfigs")
	statuses := []string{}
	for _, task := range tasks {
		statuses = append(statuses, task.GetStatus().String())
	}
	d.out["statuses"] = statuses
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
}

// limits: a limit constraint on a host attribute other than "host" (here the agents'
// "peloton/agent" label: one value per agent) holds across the job, and an instance that
// cannot fit stays PENDING with a reason naming the limit.
func (d *driver) limits() {
	job := d.job("sleep 1000", 3, true).AddLimitConstraint("peloton/agent", 1)
	_, err := d.client.CreateJob(job)
	d.must(err, "CreateJob")
	d.running(3)
	tasks, err := d.client.GetTaskStatus(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()},
		Statuses: []aurora.ScheduleStatus{aurora.ScheduleStatus_RUNNING}})
	d.must(err, "GetTaskStatus")
	hosts := map[string]bool{}
	for _, t := range tasks {
		hosts[t.GetAssignedTask().GetSlaveHost()] = true
	}
	d.out["hosts"] = len(hosts)
	_, err = d.client.AddInstances(aurora.InstanceKey{JobKey: d.key(), InstanceId: 0}, 1)
	d.must(err, "AddInstances")
	var reasons []*aurora.PendingReason
	d.eventually("a pending reason for the fourth instance", func() bool {
		reasons, err = d.client.GetPendingReason(&aurora.TaskQuery{JobKeys: []*aurora.JobKey{d.key()}})
		d.must(err, "GetPendingReason")
		return len(reasons) == 1 && strings.Contains(reasons[0].GetReason(), "per peloton/agent")
	})
	d.out["reason"] = reasons[0].GetReason()
	_, err = d.client.KillJob(d.key())
	d.must(err, "KillJob")
	d.gone()
}

// reconcile: both task reconciliation triggers are accepted.
func (d *driver) reconcile() {
	d.must(d.client.ForceImplicitTaskReconciliation(), "ForceImplicitTaskReconciliation")
	batch := int32(100)
	d.must(d.client.ForceExplicitTaskReconciliation(&batch), "ForceExplicitTaskReconciliation")
	d.out["reconciled"] = true
}

var scenarios = map[string]func(*driver){
	"service":     (*driver).service,
	"createjob":   (*driver).createJob,
	"redeploy":    (*driver).redeploy,
	"varbatch":    (*driver).varBatch,
	"watchtime":   (*driver).watchTime,
	"watchupdate": (*driver).watchUpdate,
	"cron":        (*driver).cron,
	"maintenance": (*driver).maintenance,
	"sladrain":    (*driver).slaDrain,
	"quota":       (*driver).quota,
	"pending":     (*driver).pending,
	"reconcile":   (*driver).reconcile,
	"limits":      (*driver).limits,
}

func names() string {
	var out []string
	for name := range scenarios {
		out = append(out, name)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func main() {
	url := flag.String("url", "http://127.0.0.1:5396/api", "the scheduler's /api URL")
	transport := flag.String("transport", "json", "json or binary")
	role := flag.String("role", "www", "job key role")
	env := flag.String("env", "devel", "job key environment")
	name := flag.String("name", "realis", "job key name")
	host := flag.String("host", "", "a host for the maintenance scenarios")
	timeout := flag.Duration("timeout", 90*time.Second, "how long each wait may take")
	verbose := flag.Bool("v", false, "show gorealis's log")
	flag.Parse()
	if flag.NArg() != 1 || scenarios[flag.Arg(0)] == nil {
		fmt.Fprintf(os.Stderr, "usage: realis-driver [flags] SCENARIO (one of %s)\n", names())
		os.Exit(2)
	}
	if !*verbose {
		log.SetOutput(io.Discard)
	}
	options := []realis.ClientOption{
		realis.SchedulerUrl(*url), realis.TimeoutMS(20000),
		realis.BackOff(realis.Backoff{Steps: 3, Duration: 200 * time.Millisecond, Factor: 2.0}),
	}
	switch *transport {
	case "json":
		options = append(options, realis.ThriftJSON())
	case "binary":
		options = append(options, realis.ThriftBinary())
	default:
		fmt.Fprintf(os.Stderr, "unknown transport %q\n", *transport)
		os.Exit(2)
	}
	if !*verbose {
		options = append(options, realis.SetLogger(log.New(io.Discard, "", 0)))
	}
	client, err := realis.NewRealisClient(options...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: client: %v\n", err)
		os.Exit(1)
	}
	defer client.Close()
	raw, err := rawClient(*url, *transport)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: raw client: %v\n", err)
		os.Exit(1)
	}
	d := &driver{client: client, raw: raw, monitor: &realis.Monitor{Client: client}, role: *role, env: *env,
		name: *name, host: *host, timeout: *timeout, out: map[string]interface{}{}}
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(failure); ok {
					fmt.Fprintf(os.Stderr, "FAIL: %s\n", f.msg)
				} else {
					fmt.Fprintf(os.Stderr, "FAIL: panic: %v\n", r)
				}
				code = 1
			}
		}()
		scenarios[flag.Arg(0)](d)
	}()
	out, _ := json.Marshal(d.out)
	fmt.Println(string(out))
	os.Exit(code)
}
