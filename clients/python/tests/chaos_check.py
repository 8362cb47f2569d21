"""The checks of a chaos run (chaos_harness.run_chaos): the journal's promise, job by job.

For every job the producer submitted: it was accepted (`accepted`, or `duplicate` on a retry
after an attempt whose reply was lost); fetch from 0 (after a final restart) gives seqs 0..n-1,
`accepted` first, `tokens` events, exactly one terminal event last, and the same bytes as before
that restart; no seq arrived live twice, live seqs arrived in increasing order, and every live
event is byte-equal to the fetched one; done.text is the concatenated deltas and
usage.completion_tokens the number of token ids (max_tokens, as the jobs ignore EOS, unless one
of the job's stop strings ended it; none of them is in the text); `status`
agrees (finished, next_seq n); a resubmit is refused as `duplicate`.
"""
import collections

from chaos_harness import TERMINAL, Requester

COUNTS = ("submitted", "accepted", "refused", "finished", "failed", "lost", "duplicated_events",
          "conflicting_events", "second_terminal_live", "out_of_order_live", "live_not_in_fetch",
          "gaps_after_repair", "text_mismatches", "usage_mismatches", "status_mismatches",
          "resubmit_not_duplicate", "changed_by_restart", "live_events", "fetched_events",
          "live_terminal_missed", "retried_submits", "duplicate_on_retry", "poisoned",
          "ended_by_stop_string")


def _kinds(events):
    return ",".join("%d:%s" % (e["seq"], e["kind"][0]) for e in events)


def check_job(j, rec, live, fetched, before, status, resubmit, c, problems, poison_ok=False):
    """Checks one job, adding to the counts c and the list problems."""
    def bad(what, count=None):
        if count:
            c[count] += 1
        problems.append("job %s (via %s, %d submit attempt(s)): %s" % (j, rec["via"], rec["attempts"], what))

    job = rec["job"]
    c["submitted"] += 1
    c["retried_submits"] += rec["attempts"] > 1
    c["duplicate_on_retry"] += rec["outcome"] == "duplicate_on_retry"
    if rec["outcome"] not in ("accepted", "duplicate_on_retry"):
        bad("not accepted: %s, replies %r" % (rec["outcome"], rec["replies"]), "refused")
        return
    c["accepted"] += 1
    if fetched is None:
        bad("fetch says not_found after the final restart; live %s" % _kinds([x[3] for x in live]), "lost")
        return
    events, raw, complete = fetched
    c["fetched_events"] += len(events)
    c["live_events"] += len(live)
    if before != fetched:
        bad("fetch before the final restart %s differs from after %s"
            % (_kinds(before[0]) if before else None, _kinds(events)), "changed_by_restart")
    seqs = [e["seq"] for e in events]
    if seqs != list(range(len(events))):
        bad("fetched seqs have a gap or repeat: %s" % seqs, "gaps_after_repair")
    if any(e["id"] != j for e in events):
        bad("fetched events of another id")
    terminals = [e for e in events if e["kind"] in TERMINAL]
    if not terminals:
        bad("no terminal event (complete=%s); fetched %s" % (complete, _kinds(events)), "lost")
    elif len(terminals) > 1 or events[-1]["kind"] not in TERMINAL or not complete:
        bad("terminal events not exactly one, last: %s" % _kinds(events))
    if not events or events[0]["kind"] != "accepted" or any(e["kind"] != "tokens" for e in events[1:-1]):
        bad("unexpected kinds %s" % _kinds(events))
    deltas = [e for e in events if e["kind"] == "tokens"]
    end = events[-1] if events else {}
    poisoned = poison_ok and end.get("kind") == "error" and end.get("code") == "internal" \
        and "consecutive crashes" in end.get("message", "")
    c["poisoned"] += poisoned
    if poisoned:
        pass  # the server's --poison-after: an accepted job ended once, with an error
    elif end.get("kind") == "error":
        bad("ended with error %s: %s" % (end.get("code"), end.get("message")), "failed")
    elif end.get("kind") == "done":
        c["finished"] += 1
        text = "".join(e["text"] for e in deltas)
        if text != end["text"]:
            bad("done.text %r != concatenated deltas %r" % (end["text"], text), "text_mismatches")
        n_tokens = sum(len(e["token_ids"]) for e in deltas)
        stops = job.get("stop", [])
        c["ended_by_stop_string"] += end["finish_reason"] == "stop"
        if any(x in end["text"] for x in stops):
            bad("done.text %r contains a stop string of %r" % (end["text"], stops), "text_mismatches")
        if not (end["usage"]["completion_tokens"] == n_tokens and
                ((end["finish_reason"] == "length" and n_tokens == job["max_tokens"]) or
                 (end["finish_reason"] == "stop" and stops and n_tokens <= job["max_tokens"]))):
            bad("usage.completion_tokens %d, token ids %d, max_tokens %d, finish_reason %s"
                % (end["usage"]["completion_tokens"], n_tokens, job["max_tokens"],
                   end["finish_reason"]), "usage_mismatches")
    # Live: one arrival per seq, in increasing seq order, each byte-equal to the fetched event.
    by_seq = collections.defaultdict(list)
    for _, seq, data, _ in live:
        by_seq[seq].append(data)
    for seq, copies in sorted(by_seq.items()):
        if len(copies) > 1:
            c["duplicated_events"] += len(copies) - 1
            same = len(set(copies)) == 1
            c["conflicting_events"] += not same
            bad("seq %d arrived live %d times (%s)" % (seq, len(copies), "identical" if same else "DIFFERENT content"))
    live_seqs = [x[1] for x in live]
    if any(b <= a for a, b in zip(live_seqs, live_seqs[1:])):
        bad("live seqs out of order: %s" % live_seqs, "out_of_order_live")
    live_terms = [x for x in live if x[3]["kind"] in TERMINAL]
    if len(live_terms) > 1:
        bad("%d terminal events live: %s" % (len(live_terms), _kinds([x[3] for x in live_terms])),
            "second_terminal_live")
    c["live_terminal_missed"] += not live_terms
    fetched_by_seq = {e["seq"]: (e, r) for e, r in zip(events, raw)}
    for _, seq, data, ev in live:
        if fetched_by_seq.get(seq, (None, None))[1] != data:
            bad("live seq %d (%s) is not the fetched event %s" % (seq, ev, fetched_by_seq.get(seq, (None,))[0]),
                "live_not_in_fetch")
    # status and resubmit, after the final restart.
    want = {"state": "finished", "next_seq": len(events), "finish_reason": end.get("finish_reason"),
            "completion_tokens": (end.get("usage") or {}).get("completion_tokens")}
    if end.get("kind") == "error":
        want = {"state": "failed", "next_seq": len(events)}
    got = {k: status.get(k) for k in want}
    if not status.get("ok") or got != want:
        bad("status %r, expected %r" % (status, want), "status_mismatches")
    if resubmit.get("ok") or (resubmit.get("error") or {}).get("code") != "duplicate":
        bad("resubmit answered %r, not duplicate" % (resubmit,), "resubmit_not_duplicate")


def check_run(server, recorder, producer, before, poison_ok=False):
    """The report of a run: {"counts": {...}, "problems": [...]}; problems empty when it passed."""
    c = dict.fromkeys(COUNTS, 0)
    problems = []
    prompt_tokens = collections.defaultdict(set)
    req = Requester(server)
    try:
        for j, rec in producer.jobs.items():
            fetched = req.fetch_all(j)
            status = req.call({"op": "status", "id": j})[0]
            resubmit = req.call(rec["job"])[0]
            check_job(j, rec, recorder.live.get(j, []), fetched, before.get(j), status, resubmit, c, problems,
                      poison_ok)
            if fetched and fetched[0] and fetched[0][-1]["kind"] == "done":
                prompt_tokens[rec["job"]["prompt"]].add(fetched[0][-1]["usage"]["prompt_tokens"])
        # Resumed or not, jobs of one prompt count the same prompt tokens; nothing arrived live
        # that the producer did not submit.
        for prompt, counts in prompt_tokens.items():
            if len(counts) > 1:
                c["usage_mismatches"] += 1
                problems.append("jobs of prompt %r report different usage.prompt_tokens %s" % (prompt, sorted(counts)))
        for j in set(recorder.live) - set(producer.jobs):
            problems.append("events live for unknown job %s: %s" % (j, _kinds([x[3] for x in recorder.live[j]])))
        if recorder.bad_frames:
            problems.append("%d malformed PUB messages, first %r" % (len(recorder.bad_frames), recorder.bad_frames[0]))
    finally:
        req.close()
    return {"counts": c, "problems": problems}


def summary(report):
    """One paragraph for a failure message or the bench's stderr."""
    c = report["counts"]
    lines = ["seed %s: %d kills, %d jobs submitted, %d accepted, %d finished, %d lost, %d duplicated "
             "events, %d gaps after repair, %d text mismatches; %d problems"
             % (report.get("seed"), report.get("kills", 0), c["submitted"], c["accepted"], c["finished"],
                c["lost"], c["duplicated_events"], c["gaps_after_repair"], c["text_mismatches"],
                len(report["problems"]))]
    lines += report["problems"][:40]
    return "\n".join(lines)
