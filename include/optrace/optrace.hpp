// optrace/optrace.hpp: the umbrella header; includes every public header, nothing else
#pragma once

#include <optrace/error.hpp>
#include <optrace/tensor_spec.hpp>
#include <optrace/value.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/observer.hpp>
#include <optrace/json/tensor_meta.hpp>
#include <optrace/materialize.hpp>
#include <optrace/observations.hpp>
#include <optrace/kineto.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/op_tracer.hpp>
#include <optrace/replay.hpp>
