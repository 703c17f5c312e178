// benchmarks/bench_op_tracer_overhead_shared.cpp: bench_op_tracer_overhead with all of its code,
// the tracer's callbacks included, in a shared library (bench_op_tracer_overhead_lib): the same
// arguments and figures, compiled as position-independent code.
int bench_op_tracer_overhead_main(int argc, char** argv);

int main(int argc, char** argv) { return bench_op_tracer_overhead_main(argc, argv); }
