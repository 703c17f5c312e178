// A header for docs.sees_undocumented_member: doc_check.py members must name `size`, and only it.
#pragma once

namespace example {

class Documented {
 public:
  /// A documented member.
  int count() const { return 1; }
  int total() const { return 2; }  // in count's group: documented by its comment

  int size() const { return 3; }

 private:
  int hidden() const { return 4; }
};

namespace detail {
struct Inside {
  int undocumented_but_detail() const { return 5; }
};
}  // namespace detail

}  // namespace example
