#!/usr/bin/env python3
"""Reads a Perfetto trace with the perfetto package's own compiled protos (perfetto_trace_pb2,
pip package `perfetto`; not iopath's code) and prints what it holds as JSON: slices per name,
instants, tracks by kind, flows (each I/O's flow id: slices continuing it, slices ending it),
slices left open or closed twice per track, and whether each track's events are in time order.

usage: check-perfetto.py TRACE
"""
import collections
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

TE = pb.TrackEvent
slices = collections.Counter()
instants = 0
tracks = {"process": 0, "thread": 0, "other": 0}
known = set()
flow_cont = collections.Counter()
flow_end = collections.Counter()
open_on = collections.defaultdict(list)
unbalanced = 0
unknown_track = 0
last_ts = {}
out_of_order = 0
for p in trace.packet:
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        known.add(d.uuid)
        kind = "process" if d.HasField("process") else "thread" if d.HasField("thread") else "other"
        tracks[kind] += 1
    if not p.HasField("track_event"):
        continue
    e = p.track_event
    if e.track_uuid not in known:
        unknown_track += 1
    if p.timestamp < last_ts.get(e.track_uuid, 0):
        out_of_order += 1
    last_ts[e.track_uuid] = p.timestamp
    if e.type == TE.TYPE_SLICE_BEGIN:
        slices[e.name] += 1
        open_on[e.track_uuid].append(e.name)
        for f in e.flow_ids:
            flow_cont[f] += 1
        for f in e.terminating_flow_ids:
            flow_end[f] += 1
    elif e.type == TE.TYPE_SLICE_END:
        if open_on[e.track_uuid]:
            open_on[e.track_uuid].pop()
        else:
            unbalanced += 1
    elif e.type == TE.TYPE_INSTANT:
        instants += 1
unbalanced += sum(len(v) for v in open_on.values())
print(json.dumps({
    "packets": len(trace.packet),
    "slices": dict(slices),
    "instants": instants,
    "tracks": tracks,
    "flows": len(flow_cont),
    "flows_with_3_continuing_and_1_end": sum(1 for f, n in flow_cont.items() if n == 3 and flow_end[f] == 1),
    "unbalanced_slices": unbalanced,
    "events_on_unknown_tracks": unknown_track,
    "out_of_order_events": out_of_order,
}))
