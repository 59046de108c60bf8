//! Types in C: the typedefs (and constructors) of the structs, arrays and tuples a program
//! uses, in dependency order, and properties of the primitive types.

use super::program::Program;
use super::R;
use crate::codegen::dialect::{c_type, Dialect, RESERVED};
use crate::codegen::typeck::{ty_eq, TBlock, TExpr};
use crate::codegen::{tuple_field, Prim, Ty};

pub(super) fn field_name(n: &str) -> String {
    if RESERVED.contains(&n) || n.starts_with('_') || n.starts_with("skel") {
        format!("{n}_")
    } else {
        n.to_string()
    }
}

pub(super) fn prim_tag(p: Prim) -> String {
    format!("{p:?}").to_lowercase()
}

/// The C typedef of a struct, array or tuple type, and for structs and tuples a
/// constructor `skel_make_<name>(members in Rust order)`.
pub(super) fn aggregate_decl(t: Ty, d: Dialect) -> String {
    let name = c_type(t, d);
    let members: Vec<(String, Ty)> = match t {
        Ty::Struct(s) => s
            .fields
            .iter()
            .map(|f| (field_name(f.name), f.ty))
            .collect(),
        Ty::Tuple(tt) => tt
            .elems
            .iter()
            .enumerate()
            .map(|(k, e)| (tuple_field(k), *e))
            .collect(),
        Ty::Array(a) => {
            return format!(
                "typedef struct {name} {{\n    {} v[{}];\n}} {name};\n\n",
                c_type(a.elem, d),
                a.len
            )
        }
        Ty::Prim(_) => return String::new(),
    };
    // Declared in memory order: Rust may place tuple elements in any order.
    let mut order: Vec<usize> = (0..members.len()).collect();
    if let Ty::Tuple(tt) = t {
        order.sort_by_key(|&k| tt.offsets[k]);
    }
    let mut out = format!("typedef struct {name} {{\n");
    for &k in &order {
        out.push_str(&format!(
            "    {} {};\n",
            c_type(members[k].1, d),
            members[k].0
        ));
    }
    out.push_str(&format!("}} {name};\n"));
    let params: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| format!("{} f{i}", c_type(*ty, d)))
        .collect();
    out.push_str(&format!(
        "SKEL_FN {name} skel_make_{name}({}) {{\n    {name} s;\n",
        params.join(", ")
    ));
    for (i, (m, _)) in members.iter().enumerate() {
        out.push_str(&format!("    s.{m} = f{i};\n"));
    }
    out.push_str("    return s;\n}\n\n");
    out
}

/// Width in bits and signedness of an integer type (`usize`/`isize` are 64-bit in C).
pub(super) fn int_bits(p: Prim) -> (u32, bool) {
    match p {
        Prim::I8 => (8, true),
        Prim::I16 => (16, true),
        Prim::I32 => (32, true),
        Prim::I64 | Prim::Isize => (64, true),
        Prim::U8 => (8, false),
        Prim::U16 => (16, false),
        Prim::U32 => (32, false),
        _ => (64, false),
    }
}

impl Program {
    pub(super) fn add_ty(&mut self, t: Ty) -> R<()> {
        if let Ty::Prim(_) = t {
            return Ok(());
        }
        let name = c_type(t, self.dialect);
        if let Some(old) = self
            .aggregates
            .iter()
            .find(|o| c_type(**o, self.dialect) == name)
        {
            if !ty_eq(*old, t) {
                return Err(format!("two different types named `{name}` in one program"));
            }
            return Ok(());
        }
        match t {
            Ty::Struct(s) => s.fields.iter().try_for_each(|f| self.add_ty(f.ty))?,
            Ty::Tuple(tt) => tt.elems.iter().try_for_each(|e| self.add_ty(*e))?,
            Ty::Array(a) => {
                if a.len == 0 {
                    return Err(
                        "an empty array has no device type (arrays need 1 or more elements)".into(),
                    );
                }
                self.add_ty(a.elem)?
            }
            Ty::Prim(_) => {}
        }
        self.aggregates.push(t);
        Ok(())
    }

    fn add_types_expr(&mut self, e: &TExpr) -> R<()> {
        if let Some(t) = e.ty {
            self.add_ty(t)?;
        }
        for k in &e.kids {
            self.add_types_expr(k)?;
        }
        for b in &e.blocks {
            self.add_types_block(b)?;
        }
        Ok(())
    }

    pub(super) fn add_types_block(&mut self, b: &TBlock) -> R<()> {
        for s in &b.stmts {
            if let Some(t) = s.ty {
                self.add_ty(t)?;
            }
            for k in &s.kids {
                self.add_types_expr(k)?;
            }
            for b in &s.blocks {
                self.add_types_block(b)?;
            }
        }
        if let Some(t) = &b.tail {
            self.add_types_expr(t)?;
        }
        Ok(())
    }
}
