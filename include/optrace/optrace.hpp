// optrace/optrace.hpp: the umbrella header; includes every public header, nothing else
#pragma once

#include <optrace/error.hpp>
#include <optrace/tensor_spec.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/op_tracer.hpp>
