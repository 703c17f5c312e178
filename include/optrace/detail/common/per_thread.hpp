// optrace/detail/common/per_thread.hpp: a thread's object, reached in one load on the hot path
#pragma once
// Why not a function-local `thread_local T object;`: for a T with a constructor or destructor,
// every access first checks the object's TLS guard, and in position-independent code (a user's
// shared library, where the callbacks that include our headers are compiled) each of the guard
// and the object is reached through a call of __tls_get_addr: four such calls in OpTracer's start
// callback and three in its end callback, about 100 instructions per op of a 2x2 add
// (docs/performance.md). A pointer with a constant initializer needs no guard, so the hot path
// makes one such call per callback; the object itself is made on the thread's first use.

namespace optrace::detail {

template <class T>
class PerThread {
 public:
  // The calling thread's T, made on its first call. After the thread's thread_local objects are
  // destroyed (a callback run by another thread_local's destructor), as with any thread_local,
  // it must not be used.
  static T& get() {
    T* p = slot();
    return __builtin_expect(p != nullptr, 1) ? *p : make();
  }

 private:
  static T*& slot() {
    static thread_local T* p = nullptr;
    return p;
  }

  struct Owner {
    T object;
    Owner() { slot() = &object; }
    ~Owner() { slot() = nullptr; }
  };

  __attribute__((noinline)) static T& make() {
    static thread_local Owner owner;
    return owner.object;
  }
};

}  // namespace optrace::detail
