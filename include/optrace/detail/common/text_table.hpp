// optrace/detail/common/text_table.hpp: aligned plain-text tables, as reports print them
#pragma once

#include <optrace/detail/common/printable.hpp>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

namespace optrace::detail {

/// Rows of cells printed in aligned columns two spaces apart; the first row is the head. Columns
/// named in `right` (by head text) are right-aligned (numbers); the last column is never padded;
/// trailing spaces are cut.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> head, std::vector<std::string> right = {})
      : right_(std::move(right)) {
    rows_.push_back(std::move(head));
  }
  /// Cells are printed escaped (detail::printable): a name read from a file or a file name
  /// cannot forge a line or move the terminal's cursor.
  TextTable& row(std::vector<std::string> cells) {
    cells.resize(rows_[0].size());
    for (std::string& c : cells)
      if (printable_prefix(c) != c.size()) c = printable(c);
    rows_.push_back(std::move(cells));
    return *this;
  }
  /// Rows after the head.
  size_t size() const { return rows_.size() - 1; }

  /// Prints the head and the rows; `top` > 0: only the first `top` rows (the widths are theirs),
  /// then a line saying how many are not shown: `(3 more ops; --top to show more)`.
  void print(std::ostream& out, size_t top = 0, const char* what = "rows") const {
    const std::vector<std::string>& head = rows_[0];
    const size_t shown = 1 + (top > 0 ? std::min(top, size()) : size());
    std::vector<size_t> width(head.size(), 0);
    for (size_t k = 0; k < shown; ++k)
      for (size_t i = 0; i < rows_[k].size(); ++i) width[i] = std::max(width[i], rows_[k][i].size());
    for (size_t k = 0; k < shown; ++k) {
      const std::vector<std::string>& r = rows_[k];
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        const bool right = std::find(right_.begin(), right_.end(), head[i]) != right_.end();
        const std::string pad(width[i] - r[i].size(), ' ');
        if (i + 1 == r.size()) line += right ? pad + r[i] : r[i];
        else line += (right ? pad + r[i] : r[i] + pad) + "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out << line << '\n';
    }
    if (shown < rows_.size()) out << "(" << rows_.size() - shown << " more " << what << "; --top to show more)\n";
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::string> right_;
};

/// `x` with `digits` decimals ("12.35").
inline std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

/// `part` of `whole` as a percentage with one decimal ("12.5%"); "-" when whole is 0.
inline std::string percent(double part, double whole) { return whole > 0 ? fixed(100.0 * part / whole, 1) + "%" : "-"; }

}  // namespace optrace::detail
