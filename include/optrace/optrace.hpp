// optrace/optrace.hpp: the umbrella header; includes every public header (compat.hpp only to ask the libtorch version)
#pragma once

// Foundation: errors, JSON, Python's spellings, tensor specs.
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/tensor_meta.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/python_names.hpp>
#include <optrace/tensor_spec.hpp>

// Op traces: the hf op-trace schema, OpTracer, Kineto traces, replay.
#include <optrace/op_trace_types.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/op_tracer.hpp>
#include <optrace/operator_inputs.hpp>
#include <optrace/kineto_types.hpp>
#include <optrace/kineto.hpp>
#include <optrace/replay_types.hpp>
#include <optrace/replay.hpp>
#include <optrace/execution_replay.hpp>

// Profiling: timed traces (torch.profiler's Kineto format), key averages, windows of running jobs on request.
#include <optrace/key_averages.hpp>
#include <optrace/rank_summary.hpp>
#include <optrace/profiler.hpp>
#include <optrace/on_demand.hpp>

// Observed inputs: InputObserver, dynamic shapes, observation files, materialization.
#include <optrace/value.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/materialize.hpp>
#include <optrace/observations.hpp>
#include <optrace/observer.hpp>
#include <optrace/plan.hpp>

// AOTInductor packages: libtorch >= 2.6 only (aoti.hpp stops older builds with an #error).
#include <optrace/detail/common/compat.hpp>
#if OPTRACE_HAS_AOTI
#include <optrace/aoti.hpp>
#include <optrace/serve.hpp>
#endif
