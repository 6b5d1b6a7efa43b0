//! The protocol buffer wire format, the few encodings pprof's profile.proto and Perfetto's
//! trace.proto need (varints, length-delimited fields, fixed64): two formats' worth of fields
//! written by hand instead of a code generator in the build.

#[derive(Default)]
pub struct Pb(pub Vec<u8>);

impl Pb {
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }

    /// A varint field; 0 (the default) is left out.
    pub fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }

    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    pub fn str(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    pub fn msg(&mut self, field: u32, m: Pb) {
        self.bytes(field, &m.0);
    }

    /// A packed repeated varint field.
    pub fn packed(&mut self, field: u32, vs: &[u64]) {
        let mut p = Pb::default();
        for v in vs {
            p.varint(*v);
        }
        self.bytes(field, &p.0);
    }
}
